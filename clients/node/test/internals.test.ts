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
  SandboxPersistInputError,
  SandboxPersistRangeError,
  InterruptBatchError,
  SP_ERRORS,
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
  it('class SP errors: the SQLSTATE names the code, the detail is the sentence, the hint is the table\'s', () => {
    const stale = translateError(pgError('SP001', 'stale head', 'Expected head "1" but thread "a" is at "2".'))
    expect(stale).toBeInstanceOf(SandboxCheckpointConflictError)
    expect(stale).toMatchObject({
      code: 'SANDBOX_SNAPSHOT_STALE_HEAD',
      sqlstate: 'SP001',
      message: 'Expected head "1" but thread "a" is at "2".',
      hint: SP_ERRORS.SP001.hint,
    })
    const lost = translateError(pgError('SP006', 'lost'))
    expect(lost).toBeInstanceOf(SandboxCheckpointWriterLostError)
    expect(lost).toBeInstanceOf(SandboxPersistError)
    const fork = translateError(pgError('SP011', 'x', 'Destination has state.'))
    expect(fork).toBeInstanceOf(SandboxCheckpointError)
    expect(fork).toMatchObject({ code: 'SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY', message: 'Destination has state.' })
    const epoch = translateError(pgError('SP201', 'epoch', '2 is not above 2.'))
    expect(epoch).toBeInstanceOf(SandboxPersistError)
    expect(epoch).toMatchObject({ code: 'RUN_EPOCH_NOT_INCREASING', sqlstate: 'SP201', message: 'epoch: 2 is not above 2.' })
    const batch = translateError(pgError('SP103', 'x', 'Interrupt batch references non-pending id: a.'))
    expect(batch).toBeInstanceOf(InterruptBatchError)
    expect(batch).toMatchObject({ code: 'INTERRUPT_BATCH_NON_PENDING_ID', message: 'Interrupt batch references non-pending id: a.' })
    // A detail that happens to start like a code name no longer overrides the SQLSTATE.
    const decoy = translateError(pgError('SP201', 'epoch', 'BLOB_UPLOAD_NOT_FOUND: looks like a code.'))
    expect(decoy).toMatchObject({ code: 'RUN_EPOCH_NOT_INCREASING', detail: 'BLOB_UPLOAD_NOT_FOUND: looks like a code.' })
    // The server's own hint wins over the table's.
    const hinted = Object.assign(pgError('SP501', 'busy', 'Row held.'), { hint: 'End the open transaction.' })
    expect(translateError(hinted)).toMatchObject({ code: 'LEASE_ROW_BUSY', hint: 'End the open transaction.' })
    // An SP SQLSTATE this package does not know (a newer extension).
    expect(translateError(pgError('SP999', 'new', 'Something new.'))).toMatchObject({ code: 'UNKNOWN_SP_ERROR', sqlstate: 'SP999' })
  })

  it('plain bad input: 22xxx is TypeError, 22003 and 54000 RangeError, all in the family; others pass through', () => {
    for (const code of ['22P02', '22023', '22004', '22001', '22021']) {
      const e = translateError(pgError(code, 'bad', 'Bad input.'))
      expect(e).toBeInstanceOf(TypeError)
      expect(e).toBeInstanceOf(SandboxPersistInputError)
      expect(e).toBeInstanceOf(SandboxPersistError)
      expect(e).toMatchObject({ code: 'INVALID_INPUT', sqlstate: code, detail: 'Bad input.' })
      expect(Object.keys(e as object)).toEqual(expect.arrayContaining(['code', 'sqlstate', 'detail', 'hint', 'cause']))
    }
    for (const code of ['22003', '54000']) {
      const e = translateError(pgError(code, 'range'))
      expect(e).toBeInstanceOf(RangeError)
      expect(e).toBeInstanceOf(SandboxPersistRangeError)
      expect(e).toBeInstanceOf(SandboxPersistInputError)
      expect(e).not.toBeInstanceOf(TypeError)
      expect(e).toMatchObject({ code: 'INPUT_OUT_OF_RANGE', sqlstate: code })
    }
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
      // From a live server: the detail is a sentence, the hint comes with the error.
      expect(error.detail).toMatch(/^The client clock /)
      expect(error.hint).toBe(SP_ERRORS.SP901.hint)
      expect(error.hint).toMatch(/allow_client_clock/)
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
