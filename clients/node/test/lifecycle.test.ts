/**
 * Lifecycle, observability and cancellation of the adapter (not store
 * contracts): shutdown that settles in any order, close() per factory result
 * releasing only its own share, the logger / diagnostics channel for every
 * silent degradation, a pg.Client in place of a pool, and an AbortSignal on
 * withLock's wait.
 */
import { execFile } from 'node:child_process'
import diagnostics from 'node:diagnostics_channel'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  DIAGNOSTICS_CHANNEL,
  postgresDurability,
  postgresLocks,
  postgresMaintenance,
  SandboxPersistError,
  type SandboxPersistLogger,
  type SandboxPersistReport,
} from '../src/index.js'
import { countingPool, makePool, rejection, reset, rows, sleep, until } from './helpers.js'
import { connectFailureHint, sharedListener } from '../src/listener.js'

const pool = makePool()

beforeAll(async () => {
  await reset(pool)
})

/** A logger that keeps what it is told. */
function recordingLogger(): SandboxPersistLogger & { reports: SandboxPersistReport[] } {
  const reports: SandboxPersistReport[] = []
  return { reports, warn: (_message, report) => void reports.push(report) }
}

/** Backends currently LISTENing with the given application_name. */
async function listenerBackends(applicationName: string): Promise<number> {
  const found = await rows(
    pool,
    `SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN sandbox_persist%'`,
    [applicationName],
  )
  return found.length
}

/** A listener connection factory whose backends can be told apart by application_name. */
const namedListener = (applicationName: string) => () => new pg.Client({ application_name: applicationName })

const dist = new URL('../dist/index.js', import.meta.url).href

/** Run a small ES module in a fresh Node process; resolves with its exit code and output. */
function runNode(source: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--input-type=module', '-e', source],
      { cwd: fileURLToPath(new URL('..', import.meta.url)), timeout: 80_000 }, // a hang's ceiling: a busy machine starts Node slowly
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null
        resolve({ code, stdout, stderr })
      },
    )
  })
}

describe('shutdown', () => {
  const preamble = `
    import pg from 'pg'
    import { closeSharedListeners, postgresLocks, postgresDurability } from '${dist}'
    const pool = new pg.Pool({ max: 2 })
    const locks = postgresLocks(pool)
    const durability = postgresDurability(pool)
  `
  const scenarios: Array<[string, string]> = [
    ['used, pool.end() then closeSharedListeners()', `await locks.withLock('k', async () => 1); await pool.end(); await closeSharedListeners()`],
    ['used, closeSharedListeners() then pool.end()', `await locks.withLock('k', async () => 1); await closeSharedListeners(); await pool.end()`],
    ['used, idle a while, pool.end() then closeSharedListeners()', `await durability('sd-run').snapshot(); await locks.withLock('k', async () => 1); await new Promise((r) => setTimeout(r, 300)); await pool.end(); await closeSharedListeners()`],
    ['closeSharedListeners() while the listener is still connecting', `const p = locks.withLock('k', async () => 1); await closeSharedListeners(); await p; await pool.end()`],
    ['never used, pool.end() then closeSharedListeners()', `await pool.end(); await closeSharedListeners()`],
    ['closed per store: locks.close(), durability.close(), then pool.end()', `await locks.withLock('k', async () => 1); await locks.close(); await durability.close(); await pool.end(); await closeSharedListeners()`],
  ]
  for (const [name, body] of scenarios) {
    it(`settles in any order: ${name}`, async () => {
      // Twice: the unsettled await used to depend on timing.
      for (let i = 0; i < 2; i++) {
        const result = await runNode(`${preamble}\n${body}\nconsole.log('settled')`)
        expect(result.stderr).toBe('')
        expect(result.stdout.trim()).toBe('settled')
        expect(result.code).toBe(0)
      }
    })
  }
})

describe('close() releases only what it opened', () => {
  it('stores sharing a listener keep it until the last one closes; a closed store refuses new work', async () => {
    const name = 'sp-close-share'
    const listenerClient = namedListener(name)
    const a = postgresLocks(pool, { listenerClient })
    const b = postgresLocks(pool, { listenerClient, minPollMs: 20_000, maxPollMs: 20_000 })
    const durability = postgresDurability(pool, { listenerClient })
    const maintenance = postgresMaintenance(pool, { listenerClient })
    await a.withLock('close-k', async () => undefined)
    expect(await listenerBackends(name)).toBe(1)

    await a.close()
    await a.close() // idempotent
    expect((await rejection(a.withLock('close-k', async () => undefined))).code).toBe('ADAPTER_CLOSED')
    await sleep(100)
    expect(await listenerBackends(name)).toBe(1)

    // b still gets its wake-up by notification, long before its 20 s poll.
    const holder = postgresLocks(pool)
    let release!: () => void
    const holding = holder.withLock('close-k2', () => new Promise<void>((r) => (release = r)))
    await until(() => (release as unknown) !== undefined) // the holder has the lock
    const started = performance.now()
    const waiting = b.withLock('close-k2', async () => performance.now() - started)
    await sleep(200)
    release()
    await holding
    // Half the 20 s poll interval: only the notification gets it there.
    expect(await waiting).toBeLessThan(10_000)

    await b[Symbol.asyncDispose]()
    await durability.close()
    expect(await listenerBackends(name)).toBe(1) // maintenance still holds a share
    await maintenance.close()
    await until(async () => (await listenerBackends(name)) === 0)
    await holder.close()
  })
})

describe('observable degradations', () => {
  it('a LISTEN connection that cannot be opened is reported; waiters fall back to polling and still get the lock', async () => {
    const logger = recordingLogger()
    const published: unknown[] = []
    const onMessage = (message: unknown) => void published.push(message)
    diagnostics.subscribe(DIAGNOSTICS_CHANNEL, onMessage)
    try {
      const locks = postgresLocks(pool, {
        logger,
        minPollMs: 50,
        maxPollMs: 100,
        listenerClient: () => new pg.Client({ host: '127.0.0.1', port: 1, connectionTimeoutMillis: 500 }),
      })
      expect(await locks.withLock('degraded-k', async () => 'ran')).toBe('ran')
      const failed = logger.reports.filter((r) => r.event === 'listener.connect_failed')
      expect(failed).toHaveLength(1)
      expect(failed[0]!.message).toMatch(/polling/)
      // Nothing answers on port 1: the database is down or the address wrong, not a pooler.
      expect(failed[0]!.message).toMatch(/Nothing answered at that address/)
      expect(failed[0]!.message).not.toMatch(/PgBouncer|pooler/)
      expect(failed[0]!.error).toBeInstanceOf(Error)
      expect(published).toContainEqual(expect.objectContaining({ event: 'listener.connect_failed' }))
      await locks.close()
    } finally {
      diagnostics.unsubscribe(DIAGNOSTICS_CHANNEL, onMessage)
    }
  })

  it('listener.connect_failed suggests a pooler only when the error points to one', () => {
    const sqlError = (code: string, message = 'x') => Object.assign(new Error(message), { code })
    expect(connectFailureHint(sqlError('ECONNREFUSED'))).toMatch(/is the database up/)
    expect(connectFailureHint(sqlError('ENOTFOUND'))).toMatch(/does not resolve/)
    expect(connectFailureHint(sqlError('28P01'))).toMatch(/credentials/)
    expect(connectFailureHint(sqlError('3D000'))).toMatch(/database does not exist/)
    expect(connectFailureHint(sqlError('57P03'))).toMatch(/starting up or shutting down/)
    for (const hint of ['ECONNREFUSED', 'ENOTFOUND', '28P01', '3D000', '57P03', 'XX000'].map((c) => connectFailureHint(sqlError(c)))) {
      expect(hint).not.toMatch(/pooler|PgBouncer/)
    }
    expect(connectFailureHint(sqlError('08P01', 'unsupported pkt type: 80'))).toMatch(/listenerConnectionString/)
    expect(connectFailureHint(sqlError('XX000', 'pgbouncer cannot connect to server'))).toMatch(/pooler/)
  })

  it('losing the LISTEN connection is reported, and so is getting it back', async () => {
    const logger = recordingLogger()
    const name = 'sp-lost'
    const locks = postgresLocks(pool, { logger, listenerClient: namedListener(name), minPollMs: 50, maxPollMs: 100 })
    await locks.withLock('lost-k', async () => undefined)
    await pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`,
      [name],
    )
    await until(() => logger.reports.some((r) => r.event === 'listener.lost'))
    await sleep(1_100) // the reconnect back-off
    await locks.withLock('lost-k', async () => undefined)
    await until(() => logger.reports.some((r) => r.event === 'listener.restored'))
    await locks.close()
  })

  it('failed renewals and releases are reported (the lease then expires by itself)', async () => {
    const logger = recordingLogger()
    const failing = {
      query: ((text: string, values: unknown[]) => {
        if (/lock_renew|lock_release/.test(text)) return Promise.reject(new Error('connection reset (simulated)'))
        return pool.query(text, values)
      }) as unknown as pg.Pool['query'],
    }
    const locks = postgresLocks(failing, { logger, ttlMs: 1_500, renewEveryMs: 100, safetyMarginMs: 300 })
    await locks.withLock('renew-k', () => sleep(350))
    const events = logger.reports.map((r) => r.event)
    expect(events).toContain('lock.renew_failed')
    expect(events).toContain('lock.release_failed')
    const release = logger.reports.find((r) => r.event === 'lock.release_failed')!
    expect(release).toMatchObject({ key: 'renew-k' })
    expect((release.error as Error).message).toMatch(/simulated/)
    await locks.close()
  })

  it("errors thrown by the app's onReaperWake / onAttention callbacks are reported, not swallowed", async () => {
    const logger = recordingLogger()
    const maintenance = postgresMaintenance(pool, { logger })
    const boom = new Error('boom in the reaper')
    const seen: unknown[] = []
    await maintenance.onReaperWake((wakeup) => {
      seen.push(wakeup)
      throw boom
    })
    await maintenance.onAttention(async () => {
      throw new Error('async boom')
    })
    await pool.query(`SELECT pg_notify('sandbox_persist_reaper', '{"detached":1,"due":0}')`)
    await pool.query(`SELECT pg_notify('sandbox_persist_attention', '{"kind":"reaper_missing"}')`)
    await until(() => logger.reports.filter((r) => r.event === 'callback.failed').length === 2)
    expect(seen).toEqual([{ detached: 1, due: 0 }])
    const failures = logger.reports.filter((r) => r.event === 'callback.failed')
    expect(failures.map((r) => r.callback).sort()).toEqual(['onAttention', 'onReaperWake'])
    expect(failures.find((r) => r.callback === 'onReaperWake')!.error).toBe(boom)
    await maintenance.close()
  })

  it('a chunk member whose value is undefined is reported (JSON cannot store it)', async () => {
    const logger = recordingLogger()
    const durability = postgresDurability(pool, { logger })
    const log = durability('undefined-member-run')
    await log.append([{ type: 'CUSTOM', name: 'x', value: { kept: 1, dropped: undefined }, timestamp: 1 } as never])
    await log.append([{ type: 'CUSTOM', name: 'y', value: { again: undefined }, timestamp: 2 } as never])
    await log.close()
    const reports = logger.reports.filter((r) => r.event === 'chunk.undefined_member')
    expect(reports).toHaveLength(1) // once per adapter
    expect(reports[0]).toMatchObject({ runId: 'undefined-member-run', path: 'value.dropped' })
    expect((await log.snapshot())[0]!.chunk).toEqual({ type: 'CUSTOM', name: 'x', value: { kept: 1 }, timestamp: 1 })
    await durability.close()
  })
})

describe('a pg.Client in place of a pool', () => {
  // Issue 21 item 5: the adapter reads no settings out of a client (no private
  // connectionParameters). The listener uses what the app gives it, else the
  // settings a pg.Pool was given (its public options: LS1), else node-postgres's
  // defaults (the PG* environment).
  it('with listenerClient, waiters are woken by notifications; with nothing, the listener does not borrow the client settings', async () => {
    const config = {
      host: process.env.PGHOST,
      port: Number(process.env.PGPORT),
      user: process.env.PGUSER,
      database: process.env.PGDATABASE,
    }
    const client = new pg.Client(config)
    await client.connect()
    const holderPool = new pg.Pool({ ...config, max: 2 })
    const savedPort = process.env.PGPORT
    // The environment no longer points at the database: only the app's own settings do.
    process.env.PGPORT = '1'
    try {
      const listenerClient = () => new pg.Client(config)
      const holder = postgresLocks(holderPool, { listenerClient })
      const waiter = postgresLocks(client, { pollMs: 20_000, maxPollMs: 20_000, listenerClient })
      let release!: () => void
      const holding = holder.withLock('client-k', () => new Promise<void>((r) => (release = r)))
      await until(() => (release as unknown) !== undefined) // the holder has the lock
      const started = performance.now()
      const waiting = waiter.withLock('client-k', async () => performance.now() - started)
      await sleep(300)
      release()
      await holding
      // Half the 20 s poll interval: only the notification gets it there.
      expect(await waiting).toBeLessThan(10_000)
      await holder.close()
      await waiter.close()

      // Without a listener option a client gets the default listener (the PG*
      // environment), the one a pool made from the environment gets: nothing is
      // derived from the client. A pool configured in code gets its own settings' one.
      expect(sharedListener(client, {})).toBe(sharedListener(pool, {}))
      expect(sharedListener(client, {})).not.toBe(sharedListener(holderPool, {}))
      expect(sharedListener(client, {})).not.toBe(sharedListener(client, { listenerClient }))
    } finally {
      process.env.PGPORT = savedPort
      await client.end()
      await holderPool.end()
    }
  })
})

describe('the listener of a pool configured in code (issue 33)', () => {
  const config = () => ({
    host: process.env.PGHOST,
    port: Number(process.env.PGPORT),
    user: process.env.PGUSER,
    database: process.env.PGDATABASE,
  })

  /** Run fn with the PG* environment pointing at nothing (port 1), as in an app that configures its pool in code. */
  async function withoutEnvironment<T>(fn: () => Promise<T>): Promise<T> {
    const saved = process.env.PGPORT
    process.env.PGPORT = '1'
    try {
      return await fn()
    } finally {
      process.env.PGPORT = saved
    }
  }

  it('LS1 the listener connects with the settings the pool was given, not the PG* environment: a follower is woken at once', async () => {
    const codePool = new pg.Pool({ ...config(), max: 4 })
    try {
      await withoutEnvironment(async () => {
        const logger = recordingLogger()
        const durability = postgresDurability(codePool, { logger, pollMs: 20_000 })
        const locks = postgresLocks(codePool, { logger })
        expect(await durability.health()).toEqual({ ok: true, listening: true })
        expect(await locks.health()).toEqual({ ok: true, listening: true })
        const runId = `ls1-${Date.now()}`
        const reading = (async () => {
          const seen: unknown[] = []
          for await (const entry of durability(runId).read('-1')) {
            seen.push(entry.chunk)
            if (seen.length === 1) return performance.now()
          }
          return Infinity
        })()
        await sleep(200) // the reader parks on the log
        const appended = performance.now()
        await durability(runId).append([{ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: 'x' } as never])
        // Half the 20 s poll: only a notification on the pool's own database gets it there.
        expect((await reading) - appended).toBeLessThan(10_000)
        expect(logger.reports.map((r) => r.event)).not.toContain('listener.connect_failed')
        await durability.close()
        await locks.close()
      })
    } finally {
      await codePool.end()
    }
  })

  it('LS2 a listener that cannot connect: health() is ok false with the reason, and without a logger the console is told once', async () => {
    const warnings: unknown[][] = []
    const saved = console.warn
    console.warn = (...args: unknown[]) => void warnings.push(args)
    try {
      const broken = { listenerClient: () => new pg.Client({ host: '127.0.0.1', port: 1, connectionTimeoutMillis: 500 }) }
      const locks = postgresLocks(pool, { ...broken, minPollMs: 50, maxPollMs: 100 })
      const health = await locks.health()
      expect(health.ok).toBe(false)
      expect(health.listening).toBe(false)
      expect(health.problem).toMatch(/could not open the LISTEN connection.*Nothing answered at that address/)
      expect(await locks.withLock('ls2-k', async () => 'ran')).toBe('ran') // waiters poll
      await sleep(1_100) // past the reconnect back-off: it fails again
      expect((await locks.health()).ok).toBe(false)
      const ours = warnings.filter((w) => String(w[0]).startsWith('sandbox-persist:'))
      expect(ours).toHaveLength(1)
      expect(String(ours[0]![0])).toMatch(/polling/)
      await locks.close()
    } finally {
      console.warn = saved
    }
  })

  it('LS3 with a logger the console stays quiet; health() turns ok again once the connection is back', async () => {
    const warnings: unknown[][] = []
    const saved = console.warn
    console.warn = (...args: unknown[]) => void warnings.push(args)
    const name = 'sp-ls3'
    try {
      const logger = recordingLogger()
      const locks = postgresLocks(pool, { logger, listenerClient: namedListener(name), minPollMs: 50, maxPollMs: 100 })
      expect((await locks.health()).ok).toBe(true)
      await pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [name])
      await until(() => logger.reports.some((r) => r.event === 'listener.lost'))
      await sleep(1_100) // the reconnect back-off
      await until(async () => (await locks.health()).ok)
      expect(logger.reports.map((r) => r.event)).toContain('listener.restored')
      expect(warnings.filter((w) => String(w[0]).startsWith('sandbox-persist:'))).toEqual([])
      await locks.close()
    } finally {
      console.warn = saved
    }
  })
})

describe('withLock cancellation', () => {
  it("an AbortSignal ends the wait for acquisition with the signal's reason; fn never runs", async () => {
    const holder = postgresLocks(pool)
    const waiter = postgresLocks(pool, { minPollMs: 50, maxPollMs: 100 })
    let release!: () => void
    const holding = holder.withLock('abort-k', () => new Promise<void>((r) => (release = r)))
    await until(() => (release as unknown) !== undefined) // the holder has the lock
    const controller = new AbortController()
    let ran = false
    const waiting = waiter.withLock('abort-k', async () => void (ran = true), { signal: controller.signal })
    await sleep(200)
    const reason = new Error('the user went away')
    const abortedAt = performance.now()
    controller.abort(reason)
    expect(await rejection(waiting)).toBe(reason)
    // The abort ends the wait, not the holder (who keeps the lock until after
    // this): a ceiling far below the test timeout, far above a busy machine's delay.
    expect(performance.now() - abortedAt).toBeLessThan(5_000)
    release()
    await holding
    expect(ran).toBe(false)
    // Nothing is left held: the key is free at once.
    const [free] = await rows<{ r: unknown }>(pool, `SELECT sandbox_persist.lock_acquire('abort-k', 15000) AS r`)
    expect(free!.r).not.toBeNull()
    await holder.close()
    await waiter.close()
  })

  it('an already aborted signal rejects without a round trip; a non-signal is a TypeError with a code', async () => {
    const counting = countingPool(pool)
    const locks = postgresLocks(counting.db)
    const error = await rejection(locks.withLock('abort-k2', async () => 1, { signal: AbortSignal.abort() }))
    expect(error.name).toBe('AbortError')
    expect(counting.count()).toBe(0)
    const bad = await rejection(locks.withLock('abort-k2', async () => 1, { signal: {} as AbortSignal }))
    expect(bad).toBeInstanceOf(TypeError)
    expect(bad.code).toBe('ERR_INVALID_ARG_TYPE')
    await locks.close()
  })
})

describe('SandboxPersistError', () => {
  it('ADAPTER_CLOSED is one of its codes', () => {
    const error = new SandboxPersistError('ADAPTER_CLOSED', 'closed')
    expect(error.code).toBe('ADAPTER_CLOSED')
  })
})
