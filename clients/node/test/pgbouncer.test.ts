/**
 * E21: the adapter behind Debian's PgBouncer in transaction mode. LISTEN on a
 * pooled server connection "succeeds" and its notifications never reach the
 * client; the listener's delivery check must say so (logger and diagnostics
 * channel, with the fix in the message), and with a direct listener
 * connection it must stay quiet and hand-offs must be immediate.
 *
 * The test starts its own pgbouncer (installing Debian's package with apt-get
 * when it is missing) on 127.0.0.1, PGPORT + 41 (SANDBOX_PERSIST_PGBOUNCER_PORT
 * overrides), in front of the test cluster's socket, and stops it afterwards.
 * It prints the measured hand-off lags.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import diagnostics from 'node:diagnostics_channel'
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { StreamChunk } from '@tanstack/ai'
import { DIAGNOSTICS_CHANNEL, postgresDurability, postgresLocks, type SandboxPersistReport } from '../src/index.js'
import { sharedListener, type ListenerOptions } from '../src/listener.js'
import { makePool, reset, sleep } from './helpers.js'

const direct = makePool({ max: 2 })
const port = Number(process.env.SANDBOX_PERSIST_PGBOUNCER_PORT ?? Number(process.env.PGPORT ?? 5432) + 41)
let bouncer: ChildProcess | undefined
let dir: string | undefined

/** pgbouncer's path, installing Debian's package when it is missing (as root). */
function pgbouncerBinary(): string {
  const find = () => {
    for (const candidate of ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer']) {
      if (spawnSync(candidate, ['--version']).status === 0) return candidate
    }
    return undefined
  }
  let found = find()
  if (found === undefined && process.getuid?.() === 0) {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
    spawnSync('apt-get', ['update', '-q'], { stdio: 'inherit', env })
    spawnSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', 'pgbouncer'], { stdio: 'inherit', env })
    found = find()
  }
  if (found === undefined) throw new Error('pgbouncer is not installed and could not be installed (apt-get install pgbouncer)')
  return found
}

/** Resolve once something accepts TCP connections on the port. */
async function listening(): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port }, () => {
        socket.destroy()
        resolve(true)
      })
      socket.on('error', () => resolve(false))
    })
    if (ok) return
    if (bouncer?.exitCode !== null) break
    await sleep(50)
  }
  throw new Error(`pgbouncer did not start on 127.0.0.1:${port}: ${dir ? readFileSync(path.join(dir, 'pgbouncer.log'), 'utf8') : ''}`)
}

beforeAll(async () => {
  await reset(direct)
  const binary = pgbouncerBinary()
  dir = mkdtempSync(path.join(tmpdir(), 'sp-pgbouncer-'))
  const socketDir = process.env.PGHOST ?? '/var/run/postgresql'
  writeFileSync(path.join(dir, 'users.txt'), `"${process.env.PGUSER ?? 'postgres'}" ""\n`)
  writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${socketDir} port=${process.env.PGPORT ?? 5432}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      'default_pool_size = 4',
      'max_client_conn = 100',
      `logfile = ${path.join(dir, 'pgbouncer.log')}`,
      'ignore_startup_parameters = extra_float_digits,options',
      '',
    ].join('\n'),
  )
  chmodSync(dir, 0o755)
  // pgbouncer refuses to run as root: run it as the cluster's owner.
  const asRoot = process.getuid?.() === 0
  if (asRoot) {
    const pw = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' })
    const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' })
    chownSync(dir, Number(pw.stdout.trim()), Number(gid.stdout.trim()))
  }
  const ini = path.join(dir, 'pgbouncer.ini')
  bouncer = asRoot ? spawn('runuser', ['-u', 'postgres', '--', binary, ini], { stdio: 'ignore' }) : spawn(binary, [ini], { stdio: 'ignore' })
  await listening()
})

afterAll(async () => {
  if (bouncer !== undefined && bouncer.exitCode === null) {
    const exited = new Promise<void>((resolve) => bouncer!.once('exit', () => resolve()))
    bouncer.kill('SIGTERM')
    await Promise.race([exited, sleep(5_000)])
    if (bouncer.exitCode === null) bouncer.kill('SIGKILL')
  }
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
})

/** A pool that goes through PgBouncer. */
function bouncedPool(): pg.Pool {
  return makePool({ host: '127.0.0.1', port, max: 4 })
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const fmt = (xs: number[]) => `p50 ${median(xs).toFixed(0)} ms, max ${Math.max(...xs).toFixed(0)} ms (n=${xs.length})`

/** Resumed-reader hand-off lag: append a chunk, time until a parked reader yields it. */
async function readerLags(pool: pg.Pool, options: ListenerOptions, runId: string, samples: number, fallbackPollMs = 1_500): Promise<number[]> {
  const durability = postgresDurability(pool, { ...options, fallbackPollMs })
  const producer = durability(runId)
  await producer.append([{ type: 'CUSTOM', name: 'start', value: 0, timestamp: 0 } as StreamChunk])
  const seenAt = new Map<number, number>()
  let notify: (() => void) | undefined
  const abort = new AbortController()
  const reading = (async () => {
    for await (const { chunk } of durability(runId).read('-1', abort.signal)) {
      const n = (chunk as { value?: unknown }).value
      if (typeof n === 'number') seenAt.set(n, performance.now())
      notify?.()
    }
  })()
  const lags: number[] = []
  try {
    for (let i = 1; i <= samples; i++) {
      // Vary the phase against the reader's fallback poll (a measurement, not a margin).
      await sleep((i * 271) % 900)
      await producer.append([{ type: 'CUSTOM', name: 'tick', value: i, timestamp: 0 } as StreamChunk])
      const appended = performance.now()
      while (!seenAt.has(i)) await new Promise<void>((resolve) => (notify = resolve))
      lags.push(seenAt.get(i)! - appended)
    }
  } finally {
    abort.abort()
    await producer.close()
    await reading.catch(() => undefined)
    await durability.close()
  }
  return lags
}

/** Lock hand-off lag: a holder releases, time until the parked waiter's fn runs. */
async function lockLags(pool: pg.Pool, options: ListenerOptions, key: string, samples: number, minPollMs = 250): Promise<number[]> {
  const locks = postgresLocks(pool, { ...options, minPollMs, maxPollMs: Math.max(5_000, minPollMs) })
  const lags: number[] = []
  try {
    for (let i = 0; i < samples; i++) {
      let releasedAt = 0
      let holding!: () => void
      const held = new Promise<void>((resolve) => (holding = resolve))
      const holder = locks.withLock(key, async () => {
        holding()
        await sleep(300 + ((i * 377) % 900))
      }).then(() => (releasedAt = performance.now()))
      await held
      const waiter = locks.withLock(key, async () => performance.now())
      const [, grantedAt] = await Promise.all([holder, waiter])
      lags.push(grantedAt - releasedAt)
    }
  } finally {
    await locks.close()
  }
  return lags
}

describe('E21 behind PgBouncer (transaction mode)', () => {
  it('E21 a listener through the pooler: listener.not_delivering reaches the logger and the diagnostics channel with the fix', async () => {
    const pool = bouncedPool()
    const logged: Array<SandboxPersistReport> = []
    const published: Array<SandboxPersistReport> = []
    const onReport = (message: unknown) => published.push(message as SandboxPersistReport)
    diagnostics.subscribe(DIAGNOSTICS_CHANNEL, onReport)
    const logger = { warn: (_message: string, report: SandboxPersistReport) => void logged.push(report) }
    try {
      // The listener connects as the pool does, through PgBouncer (a listener
      // given no option takes the pool's own settings: the pooler too).
      const listenerClient = () => new pg.Client({ host: '127.0.0.1', port })
      const options: ListenerOptions = { logger, listenerCheckMs: 1_000, listenerClient }
      const lagsPromise = readerLags(pool, options, 'e21-bounced', 6)
      // The delivery check ends in a verdict: an event, not a margin.
      expect(await sharedListener(pool, options).delivering()).toBe(false)
      const lags = await lagsPromise
      const locks = await lockLags(pool, options, 'e21-bounced-lock', 4)
      const notLinked = (readFileSync(path.join(dir!, 'pgbouncer.log'), 'utf8').match(/when not linked/g) ?? []).length
      console.log(
        `E21 behind PgBouncer, listener through the pooler: resumer lag ${fmt(lags)}; lock hand-off ${fmt(locks)}; ` +
          `pgbouncer logged ${notLinked} "got packet 'A' from server when not linked"`,
      )

      const report = logged.find((r) => r.event === 'listener.not_delivering')
      expect(report, 'listener.not_delivering was not logged').toBeDefined()
      expect(report!.message).toMatch(/PgBouncer/)
      expect(report!.message).toMatch(/listenerConnectionString/)
      expect(published.some((r) => r.event === 'listener.not_delivering')).toBe(true)
      // Polling still delivers everything (the check only reports).
      expect(lags).toHaveLength(6)
    } finally {
      diagnostics.unsubscribe(DIAGNOSTICS_CHANNEL, onReport)
    }
  })

  it('E21 with a direct listener connection: no report, every hand-off is a wake-up (polling set to 10 minutes)', async () => {
    const pool = bouncedPool()
    const logged: Array<SandboxPersistReport> = []
    const logger = { warn: (_message: string, report: SandboxPersistReport) => void logged.push(report) }
    // The pool goes through PgBouncer; the listener straight to the server (the fix).
    const listenerClient = () => new pg.Client({})
    const options: ListenerOptions = { logger, listenerClient }
    // Fallback polls of 10 minutes: the hand-offs below complete only if NOTIFY wakes the waiters.
    const lagsPromise = readerLags(pool, options, 'e21-direct', 6, 600_000)
    expect(await sharedListener(pool, options).delivering()).toBe(true)
    const lags = await lagsPromise
    const locks = await lockLags(pool, options, 'e21-direct-lock', 4, 600_000)
    console.log(`E21 behind PgBouncer, direct listener: resumer lag ${fmt(lags)}; lock hand-off ${fmt(locks)}`)
    expect(logged.filter((r) => r.event === 'listener.not_delivering')).toEqual([])
    expect(lags).toHaveLength(6)
    expect(locks).toHaveLength(4)
  })
})
