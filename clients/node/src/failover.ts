/**
 * The adapter across a failover (docs/contract/README.md §6 rule 16): what a
 * call that lost its connection reports, and which calls the adapter retries
 * by itself while a new primary takes over.
 *
 * A failed call is one of two kinds:
 *  - outcome known: the statement never reached a primary (the pool could not
 *    connect, the server was starting up or shutting down, or it answered
 *    read-only because it is a standby): nothing happened, so every call is
 *    retried, for up to `FAILOVER_RETRY_MS`;
 *  - outcome unknown: the connection dropped after the statement was sent; it
 *    may or may not have committed. Only calls that are idempotent by contract
 *    are retried (IDEMPOTENT: reads, releases, renewals, event-log appends that
 *    carry a producer id, closing a log); any other call rejects with
 *    `SandboxPersistConnectionError` (`CONNECTION_LOST`, `outcomeUnknown: true`)
 *    and the app decides (read back, or retry with the same ids: a repeated
 *    checkpoint id is `SANDBOX_SNAPSHOT_DUPLICATE_ID`, a repeated append is
 *    `STALE_HEAD` once the first landed).
 * Retries need a pool (each attempt takes a fresh connection); over a single
 * `pg.Client` the error is reported at once, since that client is broken.
 */
import { isDatabaseError, SandboxPersistError } from './errors.js'

/** How long the adapter keeps retrying a call across a failover before it reports `CONNECTION_LOST`. */
export const FAILOVER_RETRY_MS = 30_000

/** Why a call lost its connection (`SandboxPersistConnectionError.reason`). */
export type ConnectionLostReason =
  /** The pool could not open a connection (refused, reset or timed out before the statement was sent). */
  | 'connect_failed'
  /** The server refused new sessions (57P03: starting up, shutting down, in recovery). */
  | 'server_unavailable'
  /** The server is read-only (25006): a standby, or a primary demoted under the pool. */
  | 'read_only'
  /** The connection dropped (or the server terminated the session) after the statement was sent. */
  | 'dropped'

/**
 * `CONNECTION_LOST`: the database connection failed under a call.
 * `outcomeUnknown` is true when the statement may have committed; false when
 * it certainly did not (nothing changed, a retry is safe). `attempts` counts the
 * tries the adapter made (more than one when it retried by itself).
 */
export class SandboxPersistConnectionError extends SandboxPersistError {
  declare readonly code: 'CONNECTION_LOST'
  readonly outcomeUnknown: boolean
  readonly reason: ConnectionLostReason
  readonly attempts: number
  constructor(reason: ConnectionLostReason, outcomeUnknown: boolean, attempts: number, cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause)
    super(
      'CONNECTION_LOST',
      outcomeUnknown
        ? `The database connection was lost after the call was sent (${why}); it may or may not have taken effect.`
        : `The call did not reach a writable primary (${why}); it had no effect.`,
      typeof (cause as { code?: unknown })?.code === 'string' && /^[0-9A-Z]{5}$/.test((cause as { code: string }).code)
        ? (cause as { code: string }).code
        : undefined,
      undefined,
      { cause },
    )
    this.name = 'SandboxPersistConnectionError'
    this.outcomeUnknown = outcomeUnknown
    this.reason = reason
    this.attempts = attempts
  }
}

/**
 * The functions the adapter retries after an unknown outcome: a second run
 * has the effect of one. Reads change nothing; a release of a released lease
 * answers false; a renewal extends the same lease again; an event-log append
 * always carries the adapter's producer id and sequence, so a retry answers
 * the offsets of the first; closing a closed log does nothing.
 */
export const IDEMPOTENT: ReadonlySet<string> = new Set([
  'artifact_get', 'artifact_list', 'artifact_list_for_thread', 'attention_list',
  'blob_get', 'blob_head', 'blob_list',
  'checkpoint_get', 'checkpoint_get_head', 'checkpoint_get_parts', 'checkpoint_list', 'checkpoint_list_blob_references',
  'event_log_read', 'event_log_read_pieces', 'event_log_read_verified', 'event_log_snapshot', 'generation_run_find_latest_for_thread', 'generation_run_get',
  'instance_get', 'interrupt_get', 'message_load_thread', 'metadata_get',
  'run_find_active_run', 'run_get', 'run_list_by_thread', 'run_list_reclaimable',
  'checkpoint_release_writer', 'lock_release',
  'checkpoint_renew_writer', 'lock_renew',
  'event_log_append', 'event_log_close',
])

/** The `sandbox_persist.*` function a statement calls, or null. */
export function calledFunction(text: string): string | null {
  const m = /\bsandbox_persist\.([a-z_]+)\s*\(/.exec(text)
  return m === null ? null : (m[1] as string)
}

/** Node's socket codes of a connection that failed or dropped (ENOENT: no unix socket at the path). */
const SOCKET_CODES = /^(ECONNRESET|ECONNREFUSED|EPIPE|ETIMEDOUT|ENOTCONN|EHOSTUNREACH|ENETUNREACH|ECONNABORTED|ENOENT)$/
/** node-postgres' texts for a connection that ended, failed or timed out. */
const DRIVER_TEXTS = /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|Connection ended|Query read timeout/i
/** node-postgres' texts for a client that was already broken: the statement was never sent. */
const NOT_SENT_TEXTS = /is not queryable|Client was closed/i

/**
 * Classify a failure as a lost connection: null when it is not one (a
 * database error the server answered, a bug). `phase` says whether the
 * statement had been handed to a connection ('query') or the pool was still
 * opening one ('connect').
 */
export function connectionLost(
  error: unknown,
  phase: 'connect' | 'query',
  attempts: number,
): SandboxPersistConnectionError | null {
  if (!(error instanceof Error)) return null
  if (error instanceof SandboxPersistConnectionError) return error
  if (isDatabaseError(error)) {
    const code = error.code
    if (code === '25006') return new SandboxPersistConnectionError('read_only', false, attempts, error)
    if (code === '57P03') return new SandboxPersistConnectionError('server_unavailable', false, attempts, error)
    // admin or crash shutdown, class 08: the session ended under the call
    if (code === '57P01' || code === '57P02' || code.startsWith('08')) {
      return new SandboxPersistConnectionError(phase === 'connect' ? 'connect_failed' : 'dropped', phase === 'query', attempts, error)
    }
    return null
  }
  // Opening a connection fails only for reasons of the connection (refused,
  // reset, timed out: "timeout expired"): the statement was not sent.
  if (phase === 'connect') {
    // ... except a pool the app ended: that is no failover, and retrying would not help
    if (/after calling end on the pool/i.test(error.message)) return null
    return new SandboxPersistConnectionError('connect_failed', false, attempts, error)
  }
  const code = (error as { code?: unknown }).code
  const socket = typeof code === 'string' && SOCKET_CODES.test(code)
  if (!socket && !DRIVER_TEXTS.test(error.message) && !NOT_SENT_TEXTS.test(error.message)) return null
  if (NOT_SENT_TEXTS.test(error.message)) {
    return new SandboxPersistConnectionError('connect_failed', false, attempts, error)
  }
  return new SandboxPersistConnectionError('dropped', true, attempts, error)
}

/** The pause before retry `attempt` (1, 2, ...) across a failover: 50 ms doubling to 1 s, jittered. */
export function failoverBackoff(attempt: number): number {
  return Math.floor(Math.min(1_000, 50 * 2 ** (attempt - 1)) * (0.5 + Math.random() * 0.5))
}

/** A node-postgres pool (each `connect()` gives a client to release), as opposed to one client. */
export interface PoolLike {
  connect: () => Promise<{
    query: (text: string, values?: unknown[]) => Promise<unknown>
    release: (err?: Error | boolean) => void
    on: (event: 'error', listener: (error: Error) => void) => unknown
    removeListener: (event: 'error', listener: (error: Error) => void) => unknown
  }>
  totalCount: number
}

export function isPoolLike(db: unknown): db is PoolLike {
  return (
    typeof db === 'object' &&
    db !== null &&
    typeof (db as { connect?: unknown }).connect === 'function' &&
    typeof (db as { totalCount?: unknown }).totalCount === 'number'
  )
}
