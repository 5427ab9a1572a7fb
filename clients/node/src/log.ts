/**
 * How the adapter reports what it cannot throw: a degradation it survives (the
 * LISTEN connection failing, waiters falling back to polling, a lease renewal
 * or release that failed) and errors thrown by the app's own callbacks.
 *
 * Every event goes to the `logger` option of the factory that saw it (when
 * given) and is published on the `node:diagnostics_channel` channel
 * `sandbox-persist:adapter` (always; free when nobody subscribes).
 */
import diagnostics from 'node:diagnostics_channel'

/** What can be reported. */
export type SandboxPersistEvent =
  /** The LISTEN connection could not be opened: waiters poll until it can. */
  | 'listener.connect_failed'
  /** The LISTEN connection dropped: waiters poll until it is back. */
  | 'listener.lost'
  /** The LISTEN connection is back after a failure or loss. */
  | 'listener.restored'
  /**
   * A NOTIFY sent through the pool did not come back on the LISTEN connection
   * within `listenerCheckMs`: LISTEN went through a transaction pooler
   * (PgBouncer) or to another database. Waiters poll; the message says the fix.
   */
  | 'listener.not_delivering'
  /** A lock renewal failed with an unknown outcome (it is retried until the local deadline). */
  | 'lock.renew_failed'
  /** A lock renewal answered "lost": `fn`'s signal was aborted. */
  | 'lock.lost'
  /** Releasing a lock failed: the lease expires by itself after its ttl. */
  | 'lock.release_failed'
  /** An `onReaperWake` / `onAttention` callback threw or rejected. */
  | 'callback.failed'
  /** A notification payload was not JSON and was ignored. */
  | 'notification.invalid'
  /** A chunk had a member whose value is `undefined`: JSON cannot store it, it was dropped. */
  | 'chunk.undefined_member'
  /** `close()` could not end a log, mark a run or finish a release within its deadline (or the pool was gone). */
  | 'shutdown.incomplete'
  /** `health()` found the scheduled maintenance failing or overdue (`report.health` says why). */
  | 'maintenance.not_running'
  /** The stream server answered 500: a stream function failed with an unexpected error (`error` says which). */
  | 'streams.request_failed'
  /** The stream server answered 503: the database could not be reached (down, restarting, failing over; `error` says how). */
  | 'streams.database_unavailable'
  /** A webhook answered non-2xx, timed out or could not be reached; the database retries it with backoff. */
  | 'subscriptions.webhook_failed'
  /** A webhook URL was refused at delivery time (SSRF rules: scheme, or an address that is not public); counted as failed. */
  | 'subscriptions.webhook_refused'
  /** The delivery loop could not ask for or record deliveries (`error` says why); it asks again on its next wake-up. */
  | 'subscriptions.delivery_failed'

/** The fields every report carries, besides the event's own. */
export interface SandboxPersistReport {
  event: SandboxPersistEvent
  message: string
  error?: unknown
  [field: string]: unknown
}

/**
 * A logger: `console` fits, and so do pino, winston and bunyan loggers
 * (`warn(message, fields)` / `warn(fields, message)` both read well).
 */
export interface SandboxPersistLogger {
  warn: (message: string, report: SandboxPersistReport) => void
}

/** The `node:diagnostics_channel` channel every report is published on. */
export const DIAGNOSTICS_CHANNEL = 'sandbox-persist:adapter'
const channel = diagnostics.channel(DIAGNOSTICS_CHANNEL)

/** Send one report to the given loggers and the diagnostics channel; never throws. */
export function report(
  loggers: Iterable<SandboxPersistLogger | undefined>,
  event: SandboxPersistEvent,
  message: string,
  fields: Record<string, unknown> = {},
): void {
  const payload: SandboxPersistReport = { ...fields, event, message }
  const seen = new Set<SandboxPersistLogger>()
  for (const logger of loggers) {
    if (logger === undefined || seen.has(logger)) continue
    seen.add(logger)
    try {
      logger.warn(`sandbox_persist: ${message}`, payload)
    } catch {
      // a logger's own failure must not break the adapter
    }
  }
  if (channel.hasSubscribers) {
    try {
      channel.publish(payload)
    } catch {
      // subscribers' failures are theirs
    }
  }
}
