/**
 * Operator helpers outside the TypeScript store contracts (docs/contract/
 * maintenance.md): run one bounded maintenance pass, read the watchdog's
 * attention items, report a reaper sweep, be woken when maintenance sees
 * detached runs (`NOTIFY sandbox_persist_reaper`, A7), and tell whether the
 * scheduled maintenance really runs (`maintenance_health()`, §7), reporting
 * a failing or overdue one as `maintenance.not_running`.
 */
import { checkFunctionOption, checkInteger, checkTextId, json, run, SP, value, type Queryable } from './internal.js'
import { acquireListener, ATTENTION_CHANNEL, REAPER_CHANNEL, type ListenerOptions } from './listener.js'

export interface ReaperWakeup {
  detached: number
  due: number
}

/**
 * What `maintenance_health()` answers (docs/contract/maintenance.md §7). Times
 * are epoch milliseconds; optional members are absent when unknown.
 */
export interface MaintenanceHealth {
  /** Neither failing nor overdue. */
  ok: boolean
  /** Recorded by `schedule_maintenance`, or a pg_cron job of that name for this database. */
  scheduled: boolean
  /** `maintain()` has not completed within `boundMs`. */
  overdue: boolean
  /** pg_cron's latest finished run of the job failed and `maintain()` has not completed since. */
  failing: boolean
  /** Whether pg_cron's job and run details could be read by this role. */
  cronVisible: boolean
  /** What is wrong, as a sentence, when not ok. */
  problem?: string
  jobId?: number
  schedule?: string
  scheduledAt?: number
  /** When `maintain()` last completed. */
  lastRunAt?: number
  boundMs?: number
  boundFrom?: 'schedule' | 'setting'
  lastCronStatus?: string
  lastCronRunAt?: number
  lastFailureAt?: number
  /** pg_cron's message, e.g. `connection failed`. */
  lastFailureMessage?: string
  failuresSinceSuccess?: number
  /** Why pg_cron could not be read, or what is odd about the job. */
  cronNote?: string
  checkedAt: number
}

export interface PostgresMaintenance extends AsyncDisposable {
  /**
   * Whether the scheduled maintenance runs (`maintenance_health()`). When it
   * is failing or overdue, also reported to the `logger` and the diagnostics
   * channel as `maintenance.not_running` (with the whole result as `health`).
   * Needs extension 0.4.0 (`EXTENSION_OUTDATED` otherwise).
   */
  health: () => Promise<MaintenanceHealth>
  /** One `maintain(max_rows)` pass; counts per action. */
  maintain: (options?: { maxRows?: number; nowMs?: number }) => Promise<Record<string, unknown>>
  /** The watchdog's open items (`attention_list()`). */
  attention: () => Promise<Array<Record<string, unknown>>>
  /** Report a reaper sweep (feeds the `reaper_missing` watchdog rule). */
  heartbeat: (replica: string, summary?: unknown) => Promise<void>
  /**
   * Call `fn` on every reaper wake-up; resolves to an unsubscribe function once
   * listening. An error `fn` throws (or a promise it returns rejects with) is
   * reported to the `logger` as `callback.failed`, never swallowed silently.
   */
  onReaperWake: (fn: (wakeup: ReaperWakeup) => unknown) => Promise<() => void>
  /** Call `fn` when the watchdog announces a new attention item (errors: as `onReaperWake`). */
  onAttention: (fn: (item: { kind: string; runId?: string }) => unknown) => Promise<() => void>
  /**
   * Stop every callback registered here and release this object's share of the
   * listener connection. The pool stays open. Idempotent.
   */
  close: () => Promise<void>
}

export function postgresMaintenance(pool: Queryable, options: ListenerOptions = {}): PostgresMaintenance {
  const handle = acquireListener(pool, options)
  const listener = handle.listener
  const subscriptions = new Set<() => void>()
  const subscribe = async <T>(channel: string, name: string, fn: (payload: T) => unknown) => {
    checkFunctionOption(fn, name, `${name} expects a function.`)
    const failed = (error: unknown) =>
      handle.report('callback.failed', `the ${name} callback failed`, { callback: name, channel, error })
    const unsubscribeListener = listener.subscribe(channel, (payload) => {
      if (payload === null) return
      let parsed: T
      try {
        parsed = JSON.parse(payload) as T
      } catch (error) {
        handle.report('notification.invalid', `ignored a ${channel} notification that is not JSON`, { channel, payload, error })
        return
      }
      try {
        const result = fn(parsed)
        if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function') {
          ;(result as PromiseLike<unknown>).then(undefined, failed)
        }
      } catch (error) {
        failed(error)
      }
    })
    const unsubscribe = () => {
      subscriptions.delete(unsubscribe)
      unsubscribeListener()
    }
    subscriptions.add(unsubscribe)
    await listener.ready()
    return unsubscribe
  }
  const close = async () => {
    for (const unsubscribe of [...subscriptions]) unsubscribe()
    await handle.release()
  }
  return {
    close,
    [Symbol.asyncDispose]: close,
    async maintain(opts = {}) {
      const maxRows = opts.maxRows === undefined ? 1000 : checkInteger(opts.maxRows, 'maxRows')
      // nowMs is an injected clock (tests; needs sandbox_persist.allow_client_clock).
      const nowMs = opts.nowMs === undefined ? null : checkInteger(opts.nowMs, 'nowMs')
      return value<Record<string, unknown>>(pool, `SELECT ${SP}.maintain($1::integer, $2::bigint) AS r`, [maxRows, nowMs])
    },
    async health() {
      const health = await value<MaintenanceHealth>(pool, `SELECT ${SP}.maintenance_health() AS r`, [])
      if (!health.ok) {
        handle.report('maintenance.not_running', `scheduled maintenance is not running: ${health.problem ?? 'failing or overdue'}`, {
          health,
        })
      }
      return health
    },
    async attention() {
      return (await value<Array<Record<string, unknown>> | null>(pool, `SELECT ${SP}.attention_list() AS r`, [])) ?? []
    },
    async heartbeat(replica, summary) {
      checkTextId(replica, 'replica')
      await run(pool, `SELECT ${SP}.reaper_heartbeat($1::text, $2::json)`, [replica, json(summary)])
    },
    onReaperWake: (fn) => subscribe<ReaperWakeup>(REAPER_CHANNEL, 'onReaperWake', fn),
    onAttention: (fn) => subscribe<{ kind: string; runId?: string }>(ATTENTION_CHANNEL, 'onAttention', fn),
  }
}
