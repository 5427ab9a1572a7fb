/**
 * `LockStore` over the lease table (docs/contract/locks.md §3).
 *
 * `withLock` blocks until granted: it polls `lock_acquire` with a jittered,
 * growing interval and is woken early by `NOTIFY sandbox_persist_lock` (payload:
 * MD5 hex of the key) on the process's shared listener connection. While `fn`
 * runs the lease is renewed on a non-overlapping timer; `signal` is aborted as
 * soon as ownership can no longer be guaranteed: a renewal answered "lost", or
 * the local deadline (send time of the last successful acquire or renew + ttl −
 * safety margin, on the monotonic clock) passed without a confirmed renewal.
 * The lease is always released afterwards, also when `fn` throws.
 *
 * `close()` drains: waiters stop at once with `ADAPTER_CLOSED`; holders get
 * `closeTimeoutMs` to finish `fn` and release; a holder still running then has
 * its signal aborted (`LockLostError`, `why: 'closed'`) and its lease released
 * by `close()`, so the lease never outlives the store (and the pool).
 */
import { createHash } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { LockStore } from '@tanstack/ai/locks'
import { LeaseRowBusyError, LockAcquireTimeoutError, LockLostError, SandboxPersistError } from './errors.js'
import { abortReason, checkNumberOption, checkSignal, checkTextId, run, SP, value, type Queryable } from './internal.js'
import { SandboxPersistConnectionError } from './failover.js'
import { acquireListener, LOCK_CHANNEL, Waker, type ListenerHandle, type ListenerHealth, type ListenerOptions } from './listener.js'

export interface PostgresLockOptions extends ListenerOptions {
  /** Lease time-to-live sent as `ttl_ms` (1000..600000; default 15000). */
  ttlMs?: number
  /** Renewal period while `fn` runs (default 4000; below `ttlMs − safetyMarginMs`). */
  renewEveryMs?: number
  /** Subtracted from the ttl for the local deadline (default 1000). */
  safetyMarginMs?: number
  /** Give up waiting after this long with `LockAcquireTimeoutError` (default 15 minutes). */
  acquireTimeoutMs?: number
  /**
   * First retry interval while waiting for a held lock (default 250); it grows
   * ×1.5 with jitter up to `maxPollMs`. A release wakes waiters at once (NOTIFY).
   */
  minPollMs?: number
  /** @deprecated The old name of `minPollMs`. */
  pollMs?: number
  /** Largest retry interval while waiting (default 5000). */
  maxPollMs?: number
  /** How long `close()` lets holders finish `fn` before it aborts and releases them (default 5000). */
  closeTimeoutMs?: number
}

/** Per-call options of `withLock` (the third, optional argument). */
export interface WithLockOptions {
  /**
   * Abort the wait for acquisition: `withLock` then rejects with the signal's
   * reason and `fn` never runs. Once the lock is held, the signal has no effect.
   */
  signal?: AbortSignal | undefined
}

export interface PostgresLockStore extends LockStore, AsyncDisposable {
  withLock: <T>(key: string, fn: (signal: AbortSignal) => Promise<T>, options?: WithLockOptions) => Promise<T>
  /** The options in force, after defaults. */
  readonly options: Required<Omit<PostgresLockOptions, keyof ListenerOptions | 'pollMs'>>
  /**
   * Whether the LISTEN connection wakes waiters now: `{ ok, listening, problem? }`.
   * `ok: false` (with the reason) while they fall back to polling; for a health endpoint.
   */
  health: () => Promise<ListenerHealth>
  /**
   * Drain, then release what this store opened (its share of the listener
   * connection, which closes when no store uses it). Later `withLock` calls
   * and calls still waiting reject with `ADAPTER_CLOSED`; holders get
   * `closeTimeoutMs` to finish and release, then their signal is aborted and
   * `close()` releases their lease. Resolves when every lease is released, so
   * the pool can be ended next. Idempotent; also `await using locks = postgresLocks(pool)`.
   */
  close: () => Promise<void>
}

const positive = (n: number) => Number.isFinite(n) && n > 0

/** The store's options, checked once (also what `store.options` shows). */
type LockSettings = PostgresLockStore['options']

function lockSettings(options: PostgresLockOptions): LockSettings {
  const ttlMs = checkNumberOption(
    options.ttlMs ?? 15_000,
    'ttlMs',
    (n) => Number.isSafeInteger(n) && n >= 1_000 && n <= 600_000,
    `ttlMs must be an integer between 1000 and 600000, got ${options.ttlMs}.`,
  )
  const safetyMarginMs = checkNumberOption(
    options.safetyMarginMs ?? 1_000,
    'safetyMarginMs',
    (n) => Number.isFinite(n) && n >= 0 && n < ttlMs,
    `safetyMarginMs must be >= 0 and below ttlMs, got ${options.safetyMarginMs}.`,
  )
  const renewEveryMs = checkNumberOption(
    options.renewEveryMs ?? 4_000,
    'renewEveryMs',
    (n) => positive(n) && n < ttlMs - safetyMarginMs,
    `renewEveryMs must be > 0 and below ttlMs - safetyMarginMs (${ttlMs - safetyMarginMs}), got ${options.renewEveryMs}.`,
  )
  const acquireTimeoutMs = checkNumberOption(
    options.acquireTimeoutMs ?? 15 * 60_000,
    'acquireTimeoutMs',
    (n) => Number.isFinite(n) && n >= 0,
    `acquireTimeoutMs must be >= 0, got ${options.acquireTimeoutMs}.`,
  )
  const minPollMs = checkNumberOption(
    options.minPollMs ?? options.pollMs ?? 250,
    'minPollMs',
    positive,
    `minPollMs must be > 0, got ${options.minPollMs ?? options.pollMs}.`,
  )
  const maxPollMs = checkNumberOption(
    options.maxPollMs ?? Math.max(5_000, minPollMs),
    'maxPollMs',
    (n) => Number.isFinite(n) && n >= minPollMs,
    `maxPollMs must be >= minPollMs, got ${options.maxPollMs}.`,
  )

  const closeTimeoutMs = checkNumberOption(
    options.closeTimeoutMs ?? 5_000,
    'closeTimeoutMs',
    (n) => Number.isFinite(n) && n >= 0,
    `closeTimeoutMs must be >= 0, got ${options.closeTimeoutMs}.`,
  )
  return { ttlMs, renewEveryMs, safetyMarginMs, acquireTimeoutMs, minPollMs, maxPollMs, closeTimeoutMs }
}

export function postgresLocks(pool: Queryable, options: PostgresLockOptions = {}): PostgresLockStore {
  const settings = lockSettings(options)
  const store = new LockStoreState(pool, settings, acquireListener(pool, options))
  const close = () => store.close()
  return {
    options: { ...settings },
    close,
    health: () => store.handle.health(),
    [Symbol.asyncDispose]: close,
    withLock: <T>(key: string, fn: (signal: AbortSignal) => Promise<T>, callOptions?: WithLockOptions): Promise<T> =>
      store.withLock(key, fn, callOptions),
  }
}

/** One signal that aborts when either does (AbortSignal.any is not in every Node 20). */
function either(a: AbortSignal | undefined, b: AbortSignal): AbortSignal {
  if (a === undefined) return b
  if (a.aborted) return a
  if (b.aborted) return b
  const both = new AbortController()
  const onA = () => both.abort(a.reason)
  const onB = () => both.abort(b.reason)
  a.addEventListener('abort', onA, { once: true })
  b.addEventListener('abort', onB, { once: true })
  both.signal.addEventListener('abort', () => {
    a.removeEventListener('abort', onA)
    b.removeEventListener('abort', onB)
  }, { once: true })
  return both.signal
}

const storeClosedError = () => new SandboxPersistError('ADAPTER_CLOSED', 'This lock store was closed (close() was called).')

/** A granted lease as acquire returns it: the token, the fence and when the granting call was sent. */
interface Granted {
  ownerToken: string
  fence: number
  sentAt: number
}

/**
 * One store's state: the listener share, the withLock calls in progress
 * (for the drain of close()) and the waits for acquisition (lock_acquire).
 */
class LockStoreState {
  private closed = false
  /** Aborted by close(): every wait for acquisition stops with ADAPTER_CLOSED. */
  private readonly closing = new AbortController()
  /** withLock calls in progress: settles when the call is over; `abandon` aborts fn and releases now. */
  private readonly calls = new Map<Promise<unknown>, { abandon?: () => Promise<void> }>()
  private closedPromise: Promise<void> | undefined

  constructor(
    readonly pool: Queryable,
    readonly settings: LockSettings,
    readonly handle: ListenerHandle,
  ) {}

  close(): Promise<void> {
    return (this.closedPromise ??= this.drain())
  }

  async withLock<T>(key: string, fn: (signal: AbortSignal) => Promise<T>, callOptions?: WithLockOptions): Promise<T> {
    checkTextId(key, 'lock key')
    const waitSignal = checkSignal(callOptions?.signal, 'signal')
    if (this.closed) throw storeClosedError()
    const entry: { abandon?: () => Promise<void> } = {}
    const call = this.locked(key, fn, waitSignal, entry)
    this.calls.set(call, entry)
    try {
      return await call
    } finally {
      this.calls.delete(call)
    }
  }

  /** withLock's body: acquire (stopping when the store closes), run fn, release once. */
  private async locked<T>(
    key: string,
    fn: (signal: AbortSignal) => Promise<T>,
    waitSignal: AbortSignal | undefined,
    entry: { abandon?: () => Promise<void> },
  ): Promise<T> {
    const held = await this.acquire(key, either(waitSignal, this.closing.signal))
    const lease = new HeldLease(this, key, held)
    // close() past its deadline: fn can no longer count on the lock, then it is released.
    entry.abandon = () => lease.abandon()
    try {
      return await fn(lease.signal)
    } finally {
      await lease.release()
    }
  }

  private async acquire(key: string, signal: AbortSignal | undefined): Promise<Granted> {
    if (signal?.aborted) throw abortReason(signal)
    const { acquireTimeoutMs, minPollMs, maxPollMs } = this.settings
    const listener = this.handle.listener
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
      let interval = minPollMs
      for (;;) {
        if (signal?.aborted) throw abortReason(signal)
        waker.reset()
        const sentAt = performance.now()
        // LEASE_ROW_BUSY: a transaction left open holds the key's row, so the
        // key is as good as held: keep waiting (X26; acquireOnce).
        const lease = await this.acquireOnce(key)
        if (lease !== null) {
          if (signal?.aborted) {
            // Granted as the caller gave up: hand it straight back.
            await run(this.pool, `SELECT ${SP}.lock_release($1::text, $2::text)`, [key, lease.ownerToken]).catch((error: unknown) =>
              this.handle.report('lock.release_failed', `releasing lock ${JSON.stringify(key)} failed; it expires after its ttl`, { key, error }),
            )
            throw abortReason(signal)
          }
          return { ownerToken: lease.ownerToken, fence: lease.fence, sentAt }
        }
        const remaining = acquireTimeoutMs - (performance.now() - started)
        if (remaining <= 0) throw new LockAcquireTimeoutError(key, acquireTimeoutMs)
        const jittered = interval * (0.5 + Math.random() * 0.5)
        if ((await waker.wait(Math.min(jittered, remaining), signal)) === 'abort') throw abortReason(signal!)
        interval = Math.min(maxPollMs, interval * 1.5)
        if (!listener.connected) void listener.ready()
      }
    } finally {
      unsubscribe()
    }
  }

  /**
   * One lock_acquire. A connection lost under it (a failover) counts as "not
   * granted" and the wait goes on: an attempt that did commit was granted to
   * nobody who knows its token, so it simply expires after ttlMs.
   */
  private async acquireOnce(key: string): Promise<{ ownerToken: string; fence: number; expiresAt: number } | null> {
    try {
      return await value<{ ownerToken: string; fence: number; expiresAt: number } | null>(
        this.pool,
        `SELECT ${SP}.lock_acquire($1::text, $2::bigint) AS r`,
        [key, this.settings.ttlMs],
      )
    } catch (error) {
      if (error instanceof SandboxPersistConnectionError || error instanceof LeaseRowBusyError) return null
      throw error
    }
  }

  private async drain(): Promise<void> {
    this.closed = true
    this.closing.abort(storeClosedError())
    const { closeTimeoutMs } = this.settings
    try {
      const inProgress = [...this.calls.keys()].map((call) => call.then(() => undefined, () => undefined))
      let timer: ReturnType<typeof setTimeout> | undefined
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), closeTimeoutMs)))
      const outcome = await Promise.race([Promise.all(inProgress), late])
      clearTimeout(timer)
      if (outcome === 'late') {
        const stuck = [...this.calls.values()].filter((c) => c.abandon !== undefined)
        await Promise.all(stuck.map((c) => c.abandon!()))
        if (stuck.length > 0) {
          this.handle.report(
            'shutdown.incomplete',
            `close(): ${stuck.length} withLock call(s) still ran after closeTimeoutMs (${closeTimeoutMs} ms); their signal was aborted and their lease released`,
            { closeTimeoutMs, holders: stuck.length },
          )
        }
      }
    } finally {
      await this.handle.release()
    }
  }
}

/**
 * A lease while fn runs: renewed on a non-overlapping timer (lock_renew),
 * its signal aborted once ownership is no longer certain (lost, or the local
 * deadline passed), released once (lock_release).
 */
class HeldLease {
  private readonly controller = new AbortController()
  private stopped = false
  private deadlineTimer: ReturnType<typeof setTimeout> | undefined
  private readonly stopWaker = new Waker()
  private readonly renewLoop: Promise<void>
  private released: Promise<void> | undefined

  constructor(
    private readonly store: LockStoreState,
    private readonly key: string,
    private readonly held: Granted,
  ) {
    this.armDeadline(held.sentAt)
    this.renewLoop = this.renewUntilStopped()
  }

  /** fn's signal. */
  get signal(): AbortSignal {
    return this.controller.signal
  }

  private lose(why: 'lost' | 'deadline' | 'closed'): void {
    if (!this.controller.signal.aborted) this.controller.abort(new LockLostError(this.key, why))
  }

  private armDeadline(sentAt: number): void {
    if (this.deadlineTimer !== undefined) clearTimeout(this.deadlineTimer)
    const { ttlMs, safetyMarginMs } = this.store.settings
    const due = sentAt + ttlMs - safetyMarginMs - performance.now()
    this.deadlineTimer = setTimeout(() => this.lose('deadline'), Math.max(0, due))
  }

  private async renewUntilStopped(): Promise<void> {
    const { key, controller, store } = this
    const { renewEveryMs, ttlMs } = store.settings
    while (!this.stopped && !controller.signal.aborted) {
      await this.stopWaker.wait(renewEveryMs, controller.signal)
      if (this.stopped || controller.signal.aborted) return
      const sentAt = performance.now()
      let renewed: { expiresAt: number } | null
      try {
        renewed = await value<{ expiresAt: number } | null>(
          store.pool,
          `SELECT ${SP}.lock_renew($1::text, $2::text, $3::bigint) AS r`,
          [key, this.held.ownerToken, ttlMs],
        )
      } catch (error) {
        // Unknown outcome: keep trying; the local deadline still runs.
        if (!this.stopped) {
          store.handle.report('lock.renew_failed', `renewing lock ${JSON.stringify(key)} failed; retrying until the local deadline`, {
            key,
            error,
          })
        }
        continue
      }
      if (this.stopped) return
      if (renewed === null) {
        store.handle.report('lock.lost', `lock ${JSON.stringify(key)} was lost (expired or taken over); fn's signal is aborted`, { key })
        this.lose('lost')
        return
      }
      this.armDeadline(sentAt)
    }
  }

  release(): Promise<void> {
    return (this.released ??= this.releaseOnce())
  }

  private async releaseOnce(): Promise<void> {
    this.stopped = true
    this.stopWaker.wake()
    if (this.deadlineTimer !== undefined) clearTimeout(this.deadlineTimer)
    try {
      await run(this.store.pool, `SELECT ${SP}.lock_release($1::text, $2::text)`, [this.key, this.held.ownerToken])
    } catch (error) {
      // Best effort: an unreleased lease expires by itself.
      this.store.handle.report('lock.release_failed', `releasing lock ${JSON.stringify(this.key)} failed; it expires after its ttl`, {
        key: this.key,
        error,
      })
    }
    await this.renewLoop.catch(() => undefined)
  }

  /** close() past its deadline: fn can no longer count on the lock, then it is released. */
  async abandon(): Promise<void> {
    this.lose('closed')
    await this.release()
  }
}
