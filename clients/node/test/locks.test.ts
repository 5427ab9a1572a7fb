/**
 * The LockStore client side (docs/contract/locks.md §3): L11 and L14-L18.
 */
import { createHash } from 'node:crypto'
import pg from 'pg'
import { beforeEach, describe, expect, it } from 'vitest'
import { LeaseRowBusyError, LockAcquireTimeoutError, LockLostError, postgresCheckpoints, postgresLocks } from '../src/index.js'
import { makePool, rejection, reset, rows, sleep, until } from './helpers.js'

const pool = makePool()

beforeEach(async () => {
  await reset(pool)
})

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

const md5 = (key: string) => createHash('md5').update(key, 'utf8').digest('hex')

describe('locks', () => {
  it('L11 a committed release notifies sandbox_persist_lock with the MD5 of the key; a rolled-back one does not', async () => {
    const { client, payloads } = await listen('sandbox_persist_lock')
    try {
      const key = 'run-driver:é-😀'
      const [held] = await rows<{ r: { ownerToken: string } }>(pool, 'SELECT sandbox_persist.lock_acquire($1, 15000) AS r', [key])
      const tx = await pool.connect()
      try {
        await tx.query('BEGIN')
        await tx.query('SELECT sandbox_persist.lock_release($1, $2)', [key, held!.r.ownerToken])
        await tx.query('ROLLBACK')
      } finally {
        tx.release()
      }
      await pool.query('SELECT sandbox_persist.lock_release($1, $2)', [key, held!.r.ownerToken])
      // Wait for the committed release's notification; notifications arrive in
      // commit order, so one from the rolled-back release would have come first.
      await until(() => payloads.length > 0)
      expect(payloads).toEqual([md5(key)])
    } finally {
      await client.end()
    }
  })

  it('L14 blocks until granted and is woken by the release notification before its poll interval', async () => {
    // Two stores (two "app servers") whose poll interval is far longer than the test.
    const a = postgresLocks(pool, { pollMs: 20_000, maxPollMs: 20_000 })
    const b = postgresLocks(makePool({ max: 2 }), { pollMs: 20_000, maxPollMs: 20_000 })
    const events: string[] = []
    let releasedAt = 0
    let bStartedAt = 0
    let firstEntered!: () => void
    const entered = new Promise<void>((r) => (firstEntered = r))
    const first = a.withLock('sandbox:k14', async () => {
      events.push('a:start')
      firstEntered()
      await sleep(400)
      events.push('a:end')
      releasedAt = performance.now()
    })
    await entered
    const second = b.withLock('sandbox:k14', async () => {
      bStartedAt = performance.now()
      events.push('b:start')
      return 'b-result'
    })
    await first
    expect(await second).toBe('b-result')
    expect(events).toEqual(['a:start', 'a:end', 'b:start'])
    // Half the 20 s poll interval: only the notification gets it there.
    expect(bStartedAt - releasedAt).toBeLessThan(10_000)
  })

  it('L14 different keys never block each other', async () => {
    const locks = postgresLocks(pool)
    let inner = false
    await locks.withLock('k-a', async () => {
      await locks.withLock('k-b', async () => {
        inner = true
      })
    })
    expect(inner).toBe(true)
  })

  it('L15 when fn throws, the lock is released and the error propagates', async () => {
    const locks = postgresLocks(pool)
    const boom = new Error('boom')
    const error = await rejection(
      locks.withLock('k15', async () => {
        throw boom
      }),
    )
    expect(error).toBe(boom)
    expect(await rows(pool, `SELECT 1 FROM sandbox_persist.locks WHERE lock_key = 'k15'`)).toEqual([])
    const started = performance.now()
    await locks.withLock('k15', async () => undefined)
    // A lock left held would keep it for the 15 s ttl: half of that is a busy machine's margin.
    expect(performance.now() - started).toBeLessThan(7_500)
  })

  it('L16 losing the lease row aborts the signal (renew answers lost)', async () => {
    const locks = postgresLocks(pool, { ttlMs: 1_000, renewEveryMs: 150, safetyMarginMs: 100 })
    const reason = await locks.withLock('k16-lost', async (signal) => {
      expect(signal.aborted).toBe(false)
      await pool.query(`DELETE FROM sandbox_persist.locks WHERE lock_key = 'k16-lost'`)
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }))
      return signal.reason as LockLostError
    })
    expect(reason).toBeInstanceOf(LockLostError)
    expect(reason.why).toBe('lost')
  })

  it('L16 renewing keeps the signal alive for several ttls while fn runs', async () => {
    // Over two ttls; a stall of the event loop or the server longer than
    // ttl - margin (2.7 s) would be a real lease loss, so that is the margin.
    const locks = postgresLocks(pool, { ttlMs: 3_000, renewEveryMs: 150, safetyMarginMs: 300 })
    const aborted = await locks.withLock('k16-renew', async (signal) => {
      await sleep(6_500)
      return signal.aborted
    })
    expect(aborted).toBe(false)
  })

  it('L16 reaching the local deadline with no renewal answer aborts the signal', async () => {
    const locks = postgresLocks(pool, { ttlMs: 1_000, renewEveryMs: 150, safetyMarginMs: 100 })
    const blocker = await pool.connect()
    let abortedAt = 0
    let blockedAt = 0
    let reason: unknown
    try {
      const run = locks.withLock('k16-deadline', async (signal) => {
        // Hold the lease row so the next renew cannot answer.
        await blocker.query('BEGIN')
        await blocker.query(`SELECT 1 FROM sandbox_persist.locks WHERE lock_key = 'k16-deadline' FOR UPDATE`)
        blockedAt = performance.now()
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }))
        abortedAt = performance.now()
        reason = signal.reason
      })
      while (abortedAt === 0) await sleep(20)
      await blocker.query('ROLLBACK')
      await run
    } finally {
      blocker.release()
    }
    expect(reason).toBeInstanceOf(LockLostError)
    expect((reason as LockLostError).why).toBe('deadline')
    // acquire/renew sent at most ~150 ms before blocking: deadline = send + 1000 - 100,
    // so about 0.9 s; the ceiling (four ttls) leaves a busy machine's timer delays room
    // and still fails a deadline that comes ttls late or never.
    expect(abortedAt - blockedAt).toBeLessThan(4_000)
  })

  it('L17 a nested withLock on the same key does not run before the outer one ends (it times out)', async () => {
    const locks = postgresLocks(pool, { acquireTimeoutMs: 800, pollMs: 100 })
    let innerRan = false
    const outcome = await locks.withLock('k17', async () => {
      const error = await rejection(
        locks.withLock('k17', async () => {
          innerRan = true
        }),
      )
      return error
    })
    expect(innerRan).toBe(false)
    expect(outcome).toBeInstanceOf(LockAcquireTimeoutError)
  })

  it('L18 acquisition gives up with a timeout error after the configured time', async () => {
    const holder = postgresLocks(pool)
    const waiter = postgresLocks(pool, { acquireTimeoutMs: 600, pollMs: 50, maxPollMs: 100 })
    let release!: () => void
    const held = new Promise<void>((r) => (release = r))
    let entered!: () => void
    const isIn = new Promise<void>((r) => (entered = r))
    const holding = holder.withLock('k18', async () => {
      entered()
      await held
    })
    await isIn
    const started = performance.now()
    let ran = false
    const error = await rejection(
      waiter.withLock('k18', async () => {
        ran = true
      }),
    )
    const waited = performance.now() - started
    release()
    await holding
    expect(error).toBeInstanceOf(LockAcquireTimeoutError)
    expect(error.code).toBe('LOCK_ACQUIRE_TIMEOUT')
    expect(ran).toBe(false)
    expect(waited).toBeGreaterThanOrEqual(550)
    // The holder keeps the lock until after this: the ceiling only bounds how late
    // the give-up may come on a busy machine.
    expect(waited).toBeLessThan(8_000)
  })

  it('options are validated at construction; keys are checked before any call', async () => {
    expect(() => postgresLocks(pool, { ttlMs: 999 })).toThrow(Error)
    expect(() => postgresLocks(pool, { ttlMs: 600_001 })).toThrow(Error)
    expect(() => postgresLocks(pool, { ttlMs: 5_000, renewEveryMs: 5_000 })).toThrow(Error)
    expect(() => postgresLocks(pool, { pollMs: 0 })).toThrow(Error)
    const locks = postgresLocks(pool)
    await expect(locks.withLock({} as never, async () => 1)).rejects.toBeInstanceOf(TypeError)
    await expect(locks.withLock('a\ud800', async () => 1)).rejects.toBeInstanceOf(TypeError)
    await expect(locks.withLock('', async () => 1)).rejects.toBeInstanceOf(TypeError)
  })

  it('X26 a row held by a transaction left open: acquireWriter rejects with a retryable LeaseRowBusyError, withLock keeps waiting', async () => {
    const app = await pool.connect()
    try {
      // An app appends inside its own transaction and leaves it open: here
      // its acquire holds the thread row, and its lock_acquire the key's row.
      await app.query('BEGIN')
      await app.query("SELECT sandbox_persist.checkpoint_acquire_writer('thread-x26', 1000)")
      await app.query("SELECT sandbox_persist.lock_acquire('run-driver:x26', 1000)")
      const started = performance.now()
      const error = await rejection(postgresCheckpoints(pool).acquireWriter('thread-x26'))
      const waited = performance.now() - started
      expect(error).toBeInstanceOf(LeaseRowBusyError)
      expect(error).toMatchObject({ code: 'LEASE_ROW_BUSY', sqlstate: 'SP501', retryable: true })
      // the bound is sandbox_persist.lease_row_wait (5 s by default), not the test's timeout
      expect(waited).toBeGreaterThanOrEqual(900)
      expect(waited).toBeLessThan(10_000)
      // withLock treats the busy row as held and is granted once the transaction ends.
      const locks = postgresLocks(pool, { minPollMs: 50, maxPollMs: 200, acquireTimeoutMs: 20_000 })
      let ran = false
      const waiting = locks.withLock('run-driver:x26', async () => {
        ran = true
      })
      await sleep(1_500)
      expect(ran).toBe(false)
      await app.query('ROLLBACK')
      await waiting
      expect(ran).toBe(true)
      await locks.close()
    } finally {
      await app.query('ROLLBACK').catch(() => undefined)
      app.release()
    }
  }, 30_000)
})
