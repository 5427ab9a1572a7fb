/**
 * Operator helpers outside the TypeScript store contracts (durable-runs.md
 * section 7): run one bounded maintenance pass, read the watchdog's attention
 * items, report a reaper sweep, and be woken when maintenance sees detached
 * runs (`NOTIFY sandbox_persist_reaper`, A7).
 */
import { checkInteger, checkTextId, json, run, value, type Queryable } from './internal.js'
import { ATTENTION_CHANNEL, REAPER_CHANNEL, sharedListener, type ListenerOptions } from './listener.js'

const SP = 'sandbox_persist'

export interface ReaperWakeup {
  detached: number
  due: number
}

export interface PostgresMaintenance {
  /** One `maintain(max_rows)` pass; counts per action. */
  maintain: (options?: { maxRows?: number; nowMs?: number }) => Promise<Record<string, unknown>>
  /** The watchdog's open items (`attention_list()`). */
  attention: () => Promise<Array<Record<string, unknown>>>
  /** Report a reaper sweep (feeds the `reaper_missing` watchdog rule). */
  heartbeat: (replica: string, summary?: unknown) => Promise<void>
  /** Call `fn` on every reaper wake-up; resolves to an unsubscribe function once listening. */
  onReaperWake: (fn: (wakeup: ReaperWakeup) => void) => Promise<() => void>
  /** Call `fn` when the watchdog announces a new attention item. */
  onAttention: (fn: (item: { kind: string; runId?: string }) => void) => Promise<() => void>
}

export function postgresMaintenance(pool: Queryable, options: ListenerOptions = {}): PostgresMaintenance {
  const listener = sharedListener(pool, options)
  const subscribe = async <T>(channel: string, fn: (payload: T) => void) => {
    const unsubscribe = listener.subscribe(channel, (payload) => {
      if (payload === null) return
      try {
        fn(JSON.parse(payload) as T)
      } catch {
        // not JSON: ignore
      }
    })
    await listener.ready()
    return unsubscribe
  }
  return {
    async maintain(opts = {}) {
      const maxRows = opts.maxRows === undefined ? 1000 : checkInteger(opts.maxRows, 'maxRows')
      // nowMs is an injected clock (tests; needs sandbox_persist.allow_client_clock).
      const nowMs = opts.nowMs === undefined ? null : checkInteger(opts.nowMs, 'nowMs')
      return value<Record<string, unknown>>(pool, `SELECT ${SP}.maintain($1::integer, $2::bigint) AS r`, [maxRows, nowMs])
    },
    async attention() {
      return (await value<Array<Record<string, unknown>> | null>(pool, `SELECT ${SP}.attention_list() AS r`, [])) ?? []
    },
    async heartbeat(replica, summary) {
      checkTextId(replica, 'replica')
      await run(pool, `SELECT ${SP}.reaper_heartbeat($1::text, $2::json)`, [replica, json(summary)])
    },
    onReaperWake: (fn) => subscribe<ReaperWakeup>(REAPER_CHANNEL, fn),
    onAttention: (fn) => subscribe<{ kind: string; runId?: string }>(ATTENTION_CHANNEL, fn),
  }
}
