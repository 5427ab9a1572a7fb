/**
 * The transport rules of docs/contract/README.md §6, shared by every store: one
 * statement per method, JSON as text with explicit casts, identifier checks
 * before any `text` parameter, patch encoding, retries of 40001/40P01.
 */
import type pg from 'pg'
import { SandboxPersistError, translateError, type ErrorContext, isDatabaseError, upstreamErrorsSettled } from './errors.js'
import {
  calledFunction,
  connectionLost,
  failoverBackoff,
  FAILOVER_RETRY_MS,
  IDEMPOTENT,
  isPoolLike,
  SandboxPersistConnectionError,
} from './failover.js'
import { CopyOut } from './copy_out.js'
import { ensureCompatibleExtension } from './version.js'
import type { Queryable } from './queryable.js'

/** The extension's schema, which every statement names. */
export const SP = 'sandbox_persist'

export type { Queryable } from './queryable.js'

const RETRY_SQLSTATES = new Set(['40001', '40P01'])
const MAX_RETRIES = 5

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export interface CallOptions extends ErrorContext {
  /**
   * Also retry after a dropped connection (the outcome is unknown), besides
   * the functions failover.ts lists as idempotent. Only for calls that are
   * idempotent on retry.
   */
  retryUnknownOutcome?: boolean
}

/** How an attempt sends its statement on the connection it runs on. */
type Send<T> = (connection: Queryable) => Promise<T>

/**
 * One attempt. Over a pool the connection is taken first, so a failure to
 * connect (nothing sent) is told apart from one after the statement was sent.
 */
async function attemptOnce<T>(db: Queryable, send: Send<T>, phase: { at: 'connect' | 'query' }): Promise<T> {
  if (!isPoolLike(db)) {
    phase.at = 'query'
    await ensureCompatibleExtension(db, db)
    return send(db)
  }
  phase.at = 'connect'
  const client = await db.connect()
  phase.at = 'query'
  // A checked-out client has no pool listener: its connection's 'error' event
  // would be unhandled (the failed query reports the failure itself).
  const ignore = () => undefined
  client.on('error', ignore)
  try {
    // The first call on a pool checks the extension's version on its connection.
    await ensureCompatibleExtension(db, client)
    const result = await send(client as unknown as Queryable)
    client.release()
    return result
  } catch (error) {
    // A broken connection must not go back to the pool; a database error leaves it usable.
    client.release(isDatabaseError(error) && connectionLost(error, 'query', 1) === null ? undefined : (error as Error))
    throw error
  } finally {
    client.removeListener('error', ignore)
  }
}

/**
 * Run one statement. Serialization failures and deadlocks are retried with a
 * short jittered backoff (a failed call changed nothing). A lost connection
 * becomes `SandboxPersistConnectionError`, after the retries of failover.ts:
 * over a pool, a call that did not reach a primary is retried, and one whose
 * outcome is unknown only when it is idempotent by contract, both for up to
 * FAILOVER_RETRY_MS. Every other error is translated (errors.ts).
 */
export async function run(
  db: Queryable,
  text: string,
  values: ReadonlyArray<unknown>,
  options: CallOptions = {},
): Promise<pg.QueryResult> {
  return retrying(db, calledFunction(text), options, (connection) => connection.query(text, values as unknown[]))
}

/**
 * Whether `db` can run a COPY (runCopyOut): a pool, or one node-postgres
 * client. Any other `Queryable` is driven through `query(text, values)` only.
 */
export function canCopyOut(db: Queryable): boolean {
  const client = db as { escapeLiteral?: unknown; connection?: unknown }
  return isPoolLike(db) || (typeof client.escapeLiteral === 'function' && typeof client.connection === 'object')
}

/**
 * Run `COPY (<query>) TO STDOUT (FORMAT binary)` (copy_out.ts) and return its
 * rows as bytes, with run()'s retries and error translation. `build` makes
 * the statement on the connection it runs on (a COPY takes no parameters:
 * it quotes with that connection's `escapeLiteral`); `fn` is the function it
 * calls, for the failover rules. Only for a `db` that canCopyOut.
 */
export async function runCopyOut(
  db: Queryable,
  fn: string,
  build: (client: pg.ClientBase) => string,
  options: CallOptions = {},
): Promise<Array<Array<Buffer | null>>> {
  return retrying(db, fn, options, (connection) => {
    const client = connection as unknown as pg.ClientBase
    return client.query(new CopyOut(build(client))).rows
  })
}

/** run()'s loop: attempts of `send` until one succeeds or an error is final. */
async function retrying<T>(db: Queryable, fn: string | null, options: CallOptions, send: Send<T>): Promise<T> {
  let attempt = 0
  let lostAttempts = 0
  let lostSince: number | undefined
  let unknownSeen = false
  const phase: { at: 'connect' | 'query' } = { at: 'query' }
  for (;;) {
    try {
      return await attemptOnce(db, send, phase)
    } catch (error) {
      // The installed extension does not fit this package (version.ts): final.
      if (error instanceof SandboxPersistError) throw error
      attempt += 1
      if (isDatabaseError(error) && RETRY_SQLSTATES.has(error.code) && attempt <= MAX_RETRIES) {
        await sleep(Math.floor(5 * 2 ** attempt * (0.5 + Math.random())))
        continue
      }
      const lost = connectionLost(error, phase.at, lostAttempts + 1)
      if (lost === null) {
        await upstreamErrorsSettled()
        throw translateError(error, options)
      }
      lostAttempts += 1
      lostSince ??= Date.now()
      unknownSeen ||= lost.outcomeUnknown
      const idempotent = options.retryUnknownOutcome === true || (fn !== null && IDEMPOTENT.has(fn))
      const retry = isPoolLike(db) && (!lost.outcomeUnknown || idempotent) && Date.now() - lostSince < FAILOVER_RETRY_MS
      // once one attempt may have committed, the call's outcome stays unknown
      if (!retry) throw unknownSeen && !lost.outcomeUnknown ? new SandboxPersistConnectionError(lost.reason, true, lostAttempts, error) : lost
      await sleep(failoverBackoff(lostAttempts))
    }
  }
}

/** The single value of a one-row, one-column result (`AS r`). */
export async function value<T>(
  db: Queryable,
  text: string,
  values: ReadonlyArray<unknown>,
  options?: CallOptions,
): Promise<T> {
  const result = await run(db, text, values, options)
  const row = result.rows[0] as { r: T } | undefined
  return (row === undefined ? null : row.r) as T
}

/** JSON text for a `json` parameter; `undefined` becomes SQL NULL. */
export function json(input: unknown): string | null {
  const text = JSON.stringify(input)
  return text === undefined ? null : text
}

export function isPlainObject(input: unknown): input is Record<string, unknown> {
  return typeof input === 'object' && input !== null && !Array.isArray(input)
}

/** `String.prototype.isWellFormed` (ES2024, in every Node the package supports). */
function isWellFormed(input: string): boolean {
  return input.isWellFormed()
}

export type IdErrorFactory = (message: string) => Error

/** Bad ids are `TypeError`s with Node's argument codes, so a route can answer 400 (`httpStatusOf`). */
const typeErrorFactory: IdErrorFactory = (message) =>
  Object.assign(new TypeError(message), {
    code: message.includes('must be a string') ? 'ERR_INVALID_ARG_TYPE' : 'ERR_INVALID_ARG_VALUE',
  })

/**
 * Rule 7: an id sent as a `text` parameter must be a string (node-postgres
 * would send `{}` as '{}' and 7 as '7'), well formed (the UTF-8 encoder would
 * alias a lone surrogate to U+FFFD) and free of U+0000.
 */
export function checkTextId(
  input: unknown,
  name: string,
  makeError: IdErrorFactory = typeErrorFactory,
): string {
  const what = bothSpellings(name)
  if (typeof input !== 'string') {
    throw makeError(`${what} must be a string, got ${input === null ? 'null' : typeof input}.`)
  }
  if (!isWellFormed(input)) {
    throw makeError(`${what} contains an unpaired UTF-16 surrogate.`)
  }
  if (input.includes('\u0000')) {
    throw makeError(`${what} contains U+0000.`)
  }
  return input
}

/**
 * A camelCase argument name with its SQL spelling (`threadId (thread_id)`): the
 * server's messages name the SQL argument, so a log search finds either.
 */
function bothSpellings(name: string): string {
  const sql = name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)
  return sql === name || /\s/.test(name) ? name : `${name} (${sql})`
}

/** Like `checkTextId`, but `undefined`/`null` pass as SQL NULL. */
export function checkOptionalText(input: unknown, what: string): string | null {
  if (input === undefined || input === null) return null
  return checkTextId(input, what)
}

/** Rule 5: an integer for a `bigint` parameter. */
export function checkInteger(
  input: unknown,
  what: string,
  makeError: (message: string) => Error = (message) => new TypeError(message),
): number {
  if (typeof input !== 'number' || !Number.isInteger(input)) {
    throw makeError(`${what} must be an integer, got ${String(input)}.`)
  }
  if (!Number.isSafeInteger(input)) {
    throw new RangeError(`${what} must be within +/-(2^53 - 1), got ${String(input)}.`)
  }
  return input
}

/**
 * Rule 3: a patch with key presence. Own top-level keys whose value is
 * `undefined` become JSON null (clear); `dropKeys` are removed instead, and
 * `clearKeys` are moved to the returned `clear` list. Non-finite numbers at the
 * top level are rejected (they would stringify to null, that is, "clear").
 * Nested values are never touched.
 */
export function encodePatch(
  patch: unknown,
  options: { dropKeys?: ReadonlyArray<string>; clearKeys?: ReadonlyArray<string> } = {},
): { patch: string | null; clear: Array<string> } {
  const clear: Array<string> = []
  if (!isPlainObject(patch)) return { patch: json(patch), clear }
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(patch)) {
    const v = patch[key]
    if (v === undefined) {
      if (options.dropKeys?.includes(key)) continue
      if (options.clearKeys?.includes(key)) {
        clear.push(key)
        continue
      }
      out[key] = null
      continue
    }
    if (typeof v === 'number' && !Number.isFinite(v)) {
      throw new TypeError(`Patch field ${key} must be a finite number, got ${String(v)}.`)
    }
    out[key] = v
  }
  return { patch: JSON.stringify(out), clear }
}

/**
 * Rule 4: a structural record whose own keys holding `undefined` are sent as
 * JSON null, at this level only.
 */
export function ownUndefinedToNull(record: unknown): unknown {
  if (!isPlainObject(record)) return record
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(record)) {
    const v = record[key]
    out[key] = v === undefined ? null : v
  }
  return out
}

/** `now_ms` for a lease-sensitive call: the injected clock, or SQL NULL. */
export function clockValue(now: (() => number) | undefined): number | null {
  if (now === undefined) return null
  return checkInteger(now(), 'now()')
}

/** The `code` of an option that has the wrong type (as Node's own APIs name it). */
export const INVALID_OPTION_TYPE = 'ERR_INVALID_ARG_TYPE'
/** The `code` of an option outside its range. */
export const OPTION_OUT_OF_RANGE = 'ERR_OUT_OF_RANGE'

/** An option error as Node's APIs throw them: `TypeError`/`RangeError` with a `code` and the option's name. */
function optionError(kind: 'type' | 'range', option: string, message: string): TypeError | RangeError {
  const error = kind === 'type' ? new TypeError(message) : new RangeError(message)
  Object.defineProperty(error, 'code', {
    value: kind === 'type' ? INVALID_OPTION_TYPE : OPTION_OUT_OF_RANGE,
    enumerable: true,
  })
  Object.defineProperty(error, 'option', { value: option, enumerable: true })
  return error
}

/**
 * Validate a numeric option: a non-number is a `TypeError`
 * (`ERR_INVALID_ARG_TYPE`), a number outside `inRange` a `RangeError`
 * (`ERR_OUT_OF_RANGE`) whose message is `message`.
 */
export function checkNumberOption(
  input: unknown,
  option: string,
  inRange: (n: number) => boolean,
  message: string,
): number {
  if (typeof input !== 'number') {
    throw optionError('type', option, `${option} must be a number, got ${input === null ? 'null' : typeof input}.`)
  }
  if (!inRange(input)) throw optionError('range', option, message)
  return input
}

/** Validate a function option (`TypeError`, `ERR_INVALID_ARG_TYPE`). */
export function checkFunctionOption(input: unknown, option: string, message: string): void {
  if (typeof input !== 'function') throw optionError('type', option, message)
}

/** Validate an `AbortSignal` argument (`TypeError`, `ERR_INVALID_ARG_TYPE`). */
export function checkSignal(input: unknown, option: string): AbortSignal | undefined {
  if (input === undefined) return undefined
  if (typeof input !== 'object' || input === null || typeof (input as AbortSignal).aborted !== 'boolean' ||
      typeof (input as AbortSignal).addEventListener !== 'function') {
    throw optionError('type', option, `${option} must be an AbortSignal.`)
  }
  return input as AbortSignal
}

/** The reason an aborted signal rejects with (an `AbortError` when it has none). */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted.', 'AbortError')
}
