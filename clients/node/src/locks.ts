/**
 * `LockStore` over the lease table (durable-runs.md section 4.4).
 *
 * `withLock` blocks until granted: it polls `lock_acquire` with a jittered,
 * growing interval and is woken early by `NOTIFY sandbox_persist_lock` (payload:
 * MD5 hex of the key) on the process's shared listener connection. While `fn`
 * runs the lease is renewed on a non-overlapping timer; `signal` is aborted as
 * soon as ownership can no longer be guaranteed: a renewal answered "lost", or
 * the local deadline (send time of the last successful acquire or renew + ttl −
 * safety margin, on the monotonic clock) passed without a confirmed renewal.
 * The lease is always released afterwards, also when `fn` throws.
 */
import { createHash } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { LockStore } from '@tanstack/ai/locks'
import { LockAcquireTimeoutError, LockLostError } from './errors.js'
import { checkTextId, run, value, type Queryable } from './internal.js'
import { LOCK_CHANNEL, sharedListener, Waker, type ListenerOptions } from './listener.js'

const SP = 'sandbox_persist'

export interface PostgresLockOptions extends ListenerOptions {
  /** Lease time-to-live sent as `ttl_ms` (1000..600000; default 15000). */
  ttlMs?: number
  /** Renewal period while `fn` runs (default 4000; below `ttlMs − safetyMarginMs`). */
  renewEveryMs?: number
  /** Subtracted from the ttl for the local deadline (default 1000). */
  safetyMarginMs?: number
  /** Give up waiting after this long with `LockAcquireTimeoutError` (default 15 minutes). */
  acquireTimeoutMs?: number
  /** First poll interval while waiting (default 250); grows ×1.5 with jitter up to `maxPollMs`. */
  pollMs?: number
  /** Largest poll interval (default 5000). */
  maxPollMs?: number
}

export interface PostgresLockStore extends LockStore {
  /** The options in force, after defaults. */
  readonly options: Required<Omit<PostgresLockOptions, keyof ListenerOptions>>
}

function check(condition: boolean, message: string): void {
  if (!condition) throw new Error(message)
}

export function postgresLocks(pool: Queryable, options: PostgresLockOptions = {}): PostgresLockStore {
  const ttlMs = options.ttlMs ?? 15_000
  const safetyMarginMs = options.safetyMarginMs ?? 1_000
  const renewEveryMs = options.renewEveryMs ?? 4_000
  const acquireTimeoutMs = options.acquireTimeoutMs ?? 15 * 60_000
  const pollMs = options.pollMs ?? 250
  const maxPollMs = options.maxPollMs ?? 5_000
  check(Number.isSafeInteger(ttlMs) && ttlMs >= 1_000 && ttlMs <= 600_000, `ttlMs must be an integer between 1000 and 600000, got ${ttlMs}.`)
  check(
    Number.isFinite(safetyMarginMs) && safetyMarginMs >= 0 && safetyMarginMs < ttlMs,
    `safetyMarginMs must be >= 0 and below ttlMs, got ${safetyMarginMs}.`,
  )
  check(
    Number.isFinite(renewEveryMs) && renewEveryMs > 0 && renewEveryMs < ttlMs - safetyMarginMs,
    `renewEveryMs must be > 0 and below ttlMs - safetyMarginMs (${ttlMs - safetyMarginMs}), got ${renewEveryMs}.`,
  )
  check(Number.isFinite(acquireTimeoutMs) && acquireTimeoutMs >= 0, `acquireTimeoutMs must be >= 0, got ${acquireTimeoutMs}.`)
  check(Number.isFinite(pollMs) && pollMs > 0, `pollMs must be > 0, got ${pollMs}.`)
  check(Number.isFinite(maxPollMs) && maxPollMs >= pollMs, `maxPollMs must be >= pollMs, got ${maxPollMs}.`)

  const listener = sharedListener(pool, options)

  async function acquire(key: string): Promise<{ ownerToken: string; fence: number; sentAt: number }> {
    const hash = createHash('md5').update(key, 'utf8').digest('hex')
    const waker = new Waker()
    // Subscribe (and LISTEN) before the first attempt, so a release between
    // our failed attempt and our wait is never missed.
    const unsubscribe = listener.subscribe(LOCK_CHANNEL, (payload) => {
      if (payload === null || payload === hash) waker.wake()
    })
    try {
      await listener.ready()
      const started = performance.now()
      let interval = pollMs
      for (;;) {
        waker.reset()
        const sentAt = performance.now()
        const lease = await value<{ ownerToken: string; fence: number; expiresAt: number } | null>(
          pool,
          `SELECT ${SP}.lock_acquire($1::text, $2::bigint) AS r`,
          [key, ttlMs],
        )
        if (lease !== null) return { ownerToken: lease.ownerToken, fence: lease.fence, sentAt }
        const remaining = acquireTimeoutMs - (performance.now() - started)
        if (remaining <= 0) throw new LockAcquireTimeoutError(key, acquireTimeoutMs)
        const jittered = interval * (0.5 + Math.random() * 0.5)
        await waker.wait(Math.min(jittered, remaining))
        interval = Math.min(maxPollMs, interval * 1.5)
        if (!listener.connected) void listener.ready()
      }
    } finally {
      unsubscribe()
    }
  }

  return {
    options: { ttlMs, renewEveryMs, safetyMarginMs, acquireTimeoutMs, pollMs, maxPollMs },

    async withLock<T>(key: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
      checkTextId(key, 'lock key')
      const held = await acquire(key)
      const controller = new AbortController()
      let stopped = false
      let deadlineTimer: ReturnType<typeof setTimeout> | undefined
      const lose = (why: 'lost' | 'deadline') => {
        if (!controller.signal.aborted) controller.abort(new LockLostError(key, why))
      }
      const armDeadline = (sentAt: number) => {
        if (deadlineTimer !== undefined) clearTimeout(deadlineTimer)
        const due = sentAt + ttlMs - safetyMarginMs - performance.now()
        deadlineTimer = setTimeout(() => lose('deadline'), Math.max(0, due))
      }
      armDeadline(held.sentAt)

      const stopWaker = new Waker()
      const renewLoop = (async () => {
        while (!stopped && !controller.signal.aborted) {
          await stopWaker.wait(renewEveryMs, controller.signal)
          if (stopped || controller.signal.aborted) return
          const sentAt = performance.now()
          let renewed: { expiresAt: number } | null
          try {
            renewed = await value<{ expiresAt: number } | null>(
              pool,
              `SELECT ${SP}.lock_renew($1::text, $2::text, $3::bigint) AS r`,
              [key, held.ownerToken, ttlMs],
            )
          } catch {
            // Unknown outcome: keep trying; the local deadline still runs.
            continue
          }
          if (stopped) return
          if (renewed === null) {
            lose('lost')
            return
          }
          armDeadline(sentAt)
        }
      })()

      try {
        return await fn(controller.signal)
      } finally {
        stopped = true
        stopWaker.wake()
        if (deadlineTimer !== undefined) clearTimeout(deadlineTimer)
        try {
          await run(pool, `SELECT ${SP}.lock_release($1::text, $2::text)`, [key, held.ownerToken])
        } catch {
          // Best effort: an unreleased lease expires by itself.
        }
        await renewLoop.catch(() => undefined)
      }
    },
  }
}
