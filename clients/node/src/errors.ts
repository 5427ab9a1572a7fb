/**
 * Errors thrown by the adapter, and the translation of PostgreSQL errors
 * (SQLSTATE plus the code name at the start of `errdetail`) into them
 * (docs/contract/README.md §4).
 */

/** Contract codes of the checkpoint store (`@tanstack/ai-sandbox`). */
export type SandboxCheckpointErrorCode =
  | 'SANDBOX_SNAPSHOT_STALE_HEAD'
  | 'SANDBOX_SNAPSHOT_PARENT_MISMATCH'
  | 'SANDBOX_SNAPSHOT_DUPLICATE_ID'
  | 'SANDBOX_SNAPSHOT_NOT_HEAD'
  | 'SANDBOX_SNAPSHOT_WRITER_CONFLICT'
  | 'SANDBOX_SNAPSHOT_WRITER_LOST'
  | 'SANDBOX_SNAPSHOT_INVALID_ID'
  | 'SANDBOX_SNAPSHOT_INVALID_ENTRY'
  | 'SANDBOX_SNAPSHOT_CHECKPOINT_NOT_FOUND'
  | 'SANDBOX_SNAPSHOT_ATOMIC_FORK_REQUIRED'
  | 'SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND'
  | 'SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH'
  | 'SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY'
  /** SP015 (ours): a cross-shard import names a blob the destination shard does not hold. */
  | 'SANDBOX_SNAPSHOT_FORK_BLOB_MISSING'
  /** SP016 (ours): a delta append's claim about the parent's conversation is false; the adapter resends the whole conversation. */
  | 'SANDBOX_SNAPSHOT_PREFIX_MISMATCH'

export class SandboxCheckpointError extends Error {
  readonly code: SandboxCheckpointErrorCode
  constructor(code: SandboxCheckpointErrorCode, message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'SandboxCheckpointError'
    this.code = code
  }
}

export class SandboxCheckpointConflictError extends SandboxCheckpointError {
  constructor(message: string, options?: ErrorOptions) {
    super('SANDBOX_SNAPSHOT_STALE_HEAD', message, options)
    this.name = 'SandboxCheckpointConflictError'
  }
}

export class SandboxCheckpointParentMismatchError extends SandboxCheckpointError {
  constructor(message: string, options?: ErrorOptions) {
    super('SANDBOX_SNAPSHOT_PARENT_MISMATCH', message, options)
    this.name = 'SandboxCheckpointParentMismatchError'
  }
}

export class SandboxCheckpointDuplicateIdError extends SandboxCheckpointError {
  constructor(message: string, options?: ErrorOptions) {
    super('SANDBOX_SNAPSHOT_DUPLICATE_ID', message, options)
    this.name = 'SandboxCheckpointDuplicateIdError'
  }
}

export class SandboxCheckpointNotHeadError extends SandboxCheckpointError {
  constructor(message: string, options?: ErrorOptions) {
    super('SANDBOX_SNAPSHOT_NOT_HEAD', message, options)
    this.name = 'SandboxCheckpointNotHeadError'
  }
}

export class SandboxCheckpointWriterConflictError extends SandboxCheckpointError {
  constructor(message: string, options?: ErrorOptions) {
    super('SANDBOX_SNAPSHOT_WRITER_CONFLICT', message, options)
    this.name = 'SandboxCheckpointWriterConflictError'
  }
}

export class SandboxCheckpointWriterLostError extends SandboxCheckpointError {
  constructor(message: string, options?: ErrorOptions) {
    super('SANDBOX_SNAPSHOT_WRITER_LOST', message, options)
    this.name = 'SandboxCheckpointWriterLostError'
  }
}

export class SandboxCheckpointInvalidIdError extends SandboxCheckpointError {
  constructor(message: string, options?: ErrorOptions) {
    super('SANDBOX_SNAPSHOT_INVALID_ID', message, options)
    this.name = 'SandboxCheckpointInvalidIdError'
  }
}

export class SandboxCheckpointInvalidEntryError extends SandboxCheckpointError {
  constructor(message: string, options?: ErrorOptions) {
    super('SANDBOX_SNAPSHOT_INVALID_ENTRY', message, options)
    this.name = 'SandboxCheckpointInvalidEntryError'
  }
}

/** Codes of the set-up errors (`SandboxPersistSetupError`). */
export type SandboxPersistSetupErrorCode =
  /** 3F000: the schema `sandbox_persist` does not exist in this database. */
  | 'EXTENSION_NOT_INSTALLED'
  /** 42883: a `sandbox_persist.*` function is missing: the installed extension is older than this package. */
  | 'EXTENSION_OUTDATED'
  /** 42501 on a `sandbox_persist` object: the app's role was not granted access. */
  | 'PERMISSION_DENIED'
  /** 58P01: the server cannot load the extension's library (package not installed on that server). */
  | 'SERVER_FILES_MISSING'
  /** No SQLSTATE: the installed extension's version does not fit this adapter's (version.ts). */
  | 'EXTENSION_VERSION_INCOMPATIBLE'

/** Every code a `SandboxPersistError` can carry. */
export type SandboxPersistErrorCode =
  | 'INTERRUPT_BATCH_DUPLICATE_ID'
  | 'INTERRUPT_BATCH_MISSING_ID'
  | 'INTERRUPT_BATCH_NON_PENDING_ID'
  | 'RUN_EPOCH_NOT_INCREASING'
  | 'BLOB_CONTENT_HASH_MISMATCH'
  | 'BLOB_UPLOAD_NOT_FOUND'
  | 'BLOB_UPLOAD_OFFSET_MISMATCH'
  | 'EVENT_LOG_NOT_FOUND'
  | 'EVENT_LOG_OFFSET_OUT_OF_RANGE'
  | 'EVENT_LOG_PRODUCER_SEQ_CONFLICT'
  | 'EVENT_LOG_FENCE_STALE'
  /** SP405 (ours): a resume token the server cannot vouch for (entries lost or rewritten in a failover). */
  | 'EVENT_LOG_OFFSET_DIVERGED'
  | 'EVENT_LOG_INVALID_OFFSET'
  | 'CLIENT_CLOCK_NOT_ALLOWED'
  | 'TEST_RESET_NOT_ALLOWED'
  /** SP014: the thread is moving to another shard behind a router; retry after the move. */
  | 'SANDBOX_THREAD_MOVING'
  /**
   * SP501: an acquire or renew waited `sandbox_persist.lease_row_wait` for its
   * lease row, held by a transaction left open; nothing changed, retry
   * (`LeaseRowBusyError`).
   */
  | 'LEASE_ROW_BUSY'
  /** A class-SP error this package does not know yet (a newer extension): `sqlstate` tells which. */
  | 'UNKNOWN_SP_ERROR'
  /** The store was closed with `close()` (or is draining for a shutdown): a route answers 503. */
  | 'ADAPTER_CLOSED'
  /** A resume request does not name its run (no `X-Run-Id` / `?runId`): a route answers 400. */
  | 'RUN_ID_REQUIRED'
  /** A run id that is not a non-empty string free of CR, LF, U+0000 and lone surrogates: 400. */
  | 'INVALID_RUN_ID'
  /** A producer request names a run whose log is closed or whose record is terminal: 409. */
  | 'RUN_ALREADY_FINISHED'
  /** A producer request names a run whose log is open (another producer has it): 409, resume instead. */
  | 'RUN_ALREADY_STARTED'
  /** A blob was overwritten or deleted while its body was read in pieces: read it again. */
  | 'BLOB_VERSION_CHANGED'
  /** The connection failed under the call (`SandboxPersistConnectionError`, failover.ts): see `outcomeUnknown`. */
  | 'CONNECTION_LOST'
  | SandboxPersistSetupErrorCode

/**
 * Any other class-SP error of the extension (RUN_EPOCH_NOT_INCREASING,
 * BLOB_*, EVENT_LOG_*, CLIENT_CLOCK_NOT_ALLOWED, ...), and the adapter's own
 * (ADAPTER_CLOSED, EVENT_LOG_INVALID_OFFSET, BLOB_VERSION_CHANGED, RUN_ID_REQUIRED,
 * INVALID_RUN_ID, RUN_ALREADY_FINISHED, RUN_ALREADY_STARTED): an `Error` whose `code` is the
 * contract's code name. The driver error, when there is one, is `cause`.
 */
export class SandboxPersistError extends Error {
  readonly code: SandboxPersistErrorCode
  readonly sqlstate: string | undefined
  readonly detail: string | undefined
  constructor(code: SandboxPersistErrorCode, message: string, sqlstate?: string, detail?: string, options?: ErrorOptions) {
    super(message, options)
    this.name = 'SandboxPersistError'
    this.code = code
    this.sqlstate = sqlstate
    this.detail = detail
  }
}

/**
 * SP405: the event log cannot vouch for a resume offset: the server holds no
 * entry there, or other entries up to it, as after a failover to a standby
 * that lacked acknowledged appends (docs/contract/failover.md §2). The reader
 * must not continue from that offset: replay from the start (`'-1'`) or
 * report the stream as broken.
 */
export class EventLogOffsetDivergedError extends SandboxPersistError {
  constructor(message: string, sqlstate: string, detail: string | undefined, options?: ErrorOptions) {
    super('EVENT_LOG_OFFSET_DIVERGED', message, sqlstate, detail, options)
    this.name = 'EventLogOffsetDivergedError'
  }
}

/**
 * The database is not set up for this package: the extension is missing or
 * older than the package, the app's role has no access, or the server lacks
 * the extension's files. `hint` says what to run.
 */
export class SandboxPersistSetupError extends SandboxPersistError {
  declare readonly code: SandboxPersistSetupErrorCode
  readonly hint: string
  constructor(code: SandboxPersistSetupErrorCode, message: string, hint: string, sqlstate?: string, options?: ErrorOptions) {
    super(code, `${message} Hint: ${hint}`, sqlstate, undefined, options)
    this.name = 'SandboxPersistSetupError'
    this.hint = hint
  }
}

/**
 * SP501 `LEASE_ROW_BUSY` [X26]: a lock or checkpoint-writer acquire or renew
 * waited `sandbox_persist.lease_row_wait` for its row, which a transaction
 * left open (idle in transaction) holds. The call changed nothing; retry it
 * later (`retryable` is true). `withLock` treats it as "held" and keeps
 * waiting; the checkpoint store's `acquireWriter` and `renew` throw it.
 */
export class LeaseRowBusyError extends SandboxPersistError {
  declare readonly code: 'LEASE_ROW_BUSY'
  readonly retryable = true
  constructor(message: string, sqlstate: string, detail: string | undefined, options?: ErrorOptions) {
    super('LEASE_ROW_BUSY', message, sqlstate, detail, options)
    this.name = 'LeaseRowBusyError'
  }
}

/** `withLock` waited longer than `acquireTimeoutMs` [L18]. */
export class LockAcquireTimeoutError extends Error {
  readonly code = 'LOCK_ACQUIRE_TIMEOUT'
  readonly key: string
  readonly timeoutMs: number
  constructor(key: string, timeoutMs: number) {
    super(`Timed out after ${timeoutMs} ms waiting for lock ${JSON.stringify(key)}.`)
    this.name = 'LockAcquireTimeoutError'
    this.key = key
    this.timeoutMs = timeoutMs
  }
}

/** The abort reason of a `withLock` signal once ownership is not guaranteed [L16], or the store closes under it. */
export class LockLostError extends Error {
  readonly code = 'LOCK_LOST'
  readonly key: string
  readonly why: 'lost' | 'deadline' | 'closed'
  constructor(key: string, why: 'lost' | 'deadline' | 'closed') {
    super(
      why === 'lost'
        ? `Lock ${JSON.stringify(key)} was lost: the lease expired or was taken over.`
        : why === 'closed'
          ? `Lock ${JSON.stringify(key)} is being released: the lock store was closed and fn did not finish within closeTimeoutMs.`
          : `Lock ${JSON.stringify(key)} can no longer be guaranteed: no renewal was confirmed before the local deadline.`,
    )
    this.name = 'LockLostError'
    this.key = key
    this.why = why
  }
}

const CHECKPOINT_CLASSES: Record<string, new (message: string, options?: ErrorOptions) => SandboxCheckpointError> = {
  SANDBOX_SNAPSHOT_STALE_HEAD: SandboxCheckpointConflictError,
  SANDBOX_SNAPSHOT_PARENT_MISMATCH: SandboxCheckpointParentMismatchError,
  SANDBOX_SNAPSHOT_DUPLICATE_ID: SandboxCheckpointDuplicateIdError,
  SANDBOX_SNAPSHOT_NOT_HEAD: SandboxCheckpointNotHeadError,
  SANDBOX_SNAPSHOT_WRITER_CONFLICT: SandboxCheckpointWriterConflictError,
  SANDBOX_SNAPSHOT_WRITER_LOST: SandboxCheckpointWriterLostError,
  SANDBOX_SNAPSHOT_INVALID_ID: SandboxCheckpointInvalidIdError,
  SANDBOX_SNAPSHOT_INVALID_ENTRY: SandboxCheckpointInvalidEntryError,
}

/** SQLSTATE -> code name, used when a detail does not carry the name. */
const SP_CODES: Record<string, SandboxCheckpointErrorCode | SandboxPersistErrorCode> = {
  SP001: 'SANDBOX_SNAPSHOT_STALE_HEAD',
  SP002: 'SANDBOX_SNAPSHOT_PARENT_MISMATCH',
  SP003: 'SANDBOX_SNAPSHOT_DUPLICATE_ID',
  SP004: 'SANDBOX_SNAPSHOT_NOT_HEAD',
  SP005: 'SANDBOX_SNAPSHOT_WRITER_CONFLICT',
  SP006: 'SANDBOX_SNAPSHOT_WRITER_LOST',
  SP007: 'SANDBOX_SNAPSHOT_INVALID_ID',
  SP008: 'SANDBOX_SNAPSHOT_INVALID_ENTRY',
  SP009: 'SANDBOX_SNAPSHOT_FORK_SOURCE_NOT_FOUND',
  SP010: 'SANDBOX_SNAPSHOT_FORK_SOURCE_THREAD_MISMATCH',
  SP011: 'SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY',
  SP012: 'SANDBOX_SNAPSHOT_CHECKPOINT_NOT_FOUND',
  SP013: 'SANDBOX_SNAPSHOT_ATOMIC_FORK_REQUIRED',
  SP014: 'SANDBOX_THREAD_MOVING',
  SP015: 'SANDBOX_SNAPSHOT_FORK_BLOB_MISSING',
  SP016: 'SANDBOX_SNAPSHOT_PREFIX_MISMATCH',
  SP101: 'INTERRUPT_BATCH_DUPLICATE_ID',
  SP102: 'INTERRUPT_BATCH_MISSING_ID',
  SP103: 'INTERRUPT_BATCH_NON_PENDING_ID',
  SP201: 'RUN_EPOCH_NOT_INCREASING',
  SP301: 'BLOB_CONTENT_HASH_MISMATCH',
  SP302: 'BLOB_UPLOAD_NOT_FOUND',
  SP303: 'BLOB_UPLOAD_OFFSET_MISMATCH',
  SP401: 'EVENT_LOG_NOT_FOUND',
  SP402: 'EVENT_LOG_OFFSET_OUT_OF_RANGE',
  SP403: 'EVENT_LOG_PRODUCER_SEQ_CONFLICT',
  SP404: 'EVENT_LOG_FENCE_STALE',
  SP405: 'EVENT_LOG_OFFSET_DIVERGED',
  SP501: 'LEASE_ROW_BUSY',
  SP901: 'CLIENT_CLOCK_NOT_ALLOWED',
  SP902: 'TEST_RESET_NOT_ALLOWED',
}

/** The code names a class-SP error may carry (anything else is `UNKNOWN_SP_ERROR`). */
const KNOWN_CODES = new Set<string>(Object.values(SP_CODES))

/** The fields of a node-postgres `DatabaseError` this module reads. */
interface PgErrorLike {
  code?: unknown
  message: string
  detail?: unknown
}

export function isDatabaseError(error: unknown): error is PgErrorLike & { code: string } {
  return (
    error instanceof Error &&
    typeof (error as PgErrorLike).code === 'string' &&
    /^[0-9A-Z]{5}$/.test((error as PgErrorLike).code as string)
  )
}

/** How one call wants a few standard codes reported. */
export interface ErrorContext {
  /**
   * The server puts an upstream text in `errdetail` for these SQLSTATEs
   * (blob range errors, the metadata null rejection): use it as the message.
   */
  detailIsMessage?: ReadonlyArray<string>
  /** SQLSTATEs reported as `RangeError` in this call besides 22003/54000. */
  rangeErrors?: ReadonlyArray<string>
}

/** Attach the SQLSTATE and detail to a translated error (the driver error is its `cause`). */
function decorate<T extends Error>(error: T, sqlstate: string, detail: string | undefined): T {
  Object.defineProperty(error, 'sqlstate', { value: sqlstate, enumerable: false })
  Object.defineProperty(error, 'detail', { value: detail, enumerable: false })
  return error
}

/** A set-up failure (the database is not ready for this package), or null. */
function setupError(sqlstate: string, message: string, cause: unknown): SandboxPersistSetupError | null {
  const ours = /sandbox_persist/.test(message)
  if (sqlstate === '3F000' && ours) {
    return new SandboxPersistSetupError(
      'EXTENSION_NOT_INSTALLED',
      `The sandbox_persist extension is not installed in this database (${message}).`,
      'run CREATE EXTENSION sandbox_persist; (as a superuser or the database owner) in the database the pool connects to.',
      sqlstate,
      { cause },
    )
  }
  if (sqlstate === '42883' && ours) {
    return new SandboxPersistSetupError(
      'EXTENSION_OUTDATED',
      `The installed sandbox_persist extension lacks a function this package calls (${message}).`,
      'run ALTER EXTENSION sandbox_persist UPDATE; after installing the matching server package.',
      sqlstate,
      { cause },
    )
  }
  if (sqlstate === '42501' && ours) {
    return new SandboxPersistSetupError(
      'PERMISSION_DENIED',
      `The database role has no access to sandbox_persist (${message}).`,
      "run SELECT sandbox_persist.grant_app_role('<your app role>'); as the extension's owner.",
      sqlstate,
      { cause },
    )
  }
  if (sqlstate === '58P01' && ours) {
    return new SandboxPersistSetupError(
      'SERVER_FILES_MISSING',
      `The database server cannot load the sandbox_persist library (${message}).`,
      'install the sandbox_persist server package (make install, or your distribution package) on every database server, then reconnect.',
      sqlstate,
      { cause },
    )
  }
  return null
}

/**
 * Translate a node-postgres error into the adapter's error
 * (docs/contract/README.md §4).
 */
export function translateError(error: unknown, context: ErrorContext = {}): unknown {
  if (!isDatabaseError(error)) return error
  const sqlstate = error.code
  const detail = typeof error.detail === 'string' ? error.detail : undefined

  const setup = setupError(sqlstate, error.message, error)
  if (setup !== null) return setup

  if (sqlstate.startsWith('SP')) {
    let code: string = SP_CODES[sqlstate] ?? 'UNKNOWN_SP_ERROR'
    let sentence = detail ?? error.message
    const match = detail === undefined ? null : /^([A-Z][A-Z0-9_]*): ([\s\S]*)$/.exec(detail)
    if (match) {
      code = match[1] as string
      sentence = match[2] as string
    }
    if (code.startsWith('SANDBOX_SNAPSHOT_')) {
      const Ctor = CHECKPOINT_CLASSES[code]
      const e = Ctor
        ? new Ctor(sentence, { cause: error })
        : new SandboxCheckpointError(code as SandboxCheckpointErrorCode, sentence, { cause: error })
      return decorate(e, sqlstate, detail)
    }
    if (code.startsWith('INTERRUPT_BATCH_')) {
      // Upstream throws a plain Error with exactly this text.
      const e = new Error(sentence, { cause: error })
      Object.defineProperty(e, 'code', { value: code, enumerable: false })
      return decorate(e, sqlstate, detail)
    }
    if (!KNOWN_CODES.has(code)) code = 'UNKNOWN_SP_ERROR'
    if (code === 'EVENT_LOG_OFFSET_DIVERGED') {
      return decorate(
        new EventLogOffsetDivergedError(`${error.message}: ${sentence}`, sqlstate, detail, { cause: error }),
        sqlstate,
        detail,
      )
    }
    if (code === 'LEASE_ROW_BUSY') {
      return decorate(new LeaseRowBusyError(`${error.message}: ${sentence}`, sqlstate, detail, { cause: error }), sqlstate, detail)
    }
    return decorate(
      new SandboxPersistError(code as SandboxPersistErrorCode, `${error.message}: ${sentence}`, sqlstate, detail, { cause: error }),
      sqlstate,
      detail,
    )
  }

  const useDetail = detail !== undefined && (context.detailIsMessage ?? []).includes(sqlstate)
  const message = useDetail ? (detail as string) : detail ? `${error.message}: ${detail}` : error.message
  if (sqlstate === '22003' || sqlstate === '54000' || (context.rangeErrors ?? []).includes(sqlstate)) {
    return decorate(new RangeError(message, { cause: error }), sqlstate, detail)
  }
  if (sqlstate.startsWith('22')) {
    return decorate(new TypeError(message, { cause: error }), sqlstate, detail)
  }
  return error
}

/**
 * The HTTP status a route answers for an adapter error it does not handle
 * itself, from the error's `code`; `undefined` for anything else (a real
 * 500). 400: the request is malformed; 404: no such log; 409: the run named
 * by a producer request already exists; 503: this replica is shutting down or
 * the thread is moving (retry, possibly elsewhere).
 */
export function httpStatusOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined
  const { code, sqlstate } = error as { code?: unknown; sqlstate?: unknown }
  const byCode = typeof code === 'string' ? HTTP_STATUS[code] : undefined
  if (byCode !== undefined) return byCode
  // The server refused the input (class 22: a bad id, a malformed payload): the request's fault.
  return typeof sqlstate === 'string' && sqlstate.startsWith('22') ? 400 : undefined
}

const HTTP_STATUS: Record<string, number> = {
  /** An id the adapter refused before any call (not a string, U+0000, a lone surrogate). */
  ERR_INVALID_ARG_TYPE: 400,
  ERR_INVALID_ARG_VALUE: 400,
  RUN_ID_REQUIRED: 400,
  INVALID_RUN_ID: 400,
  EVENT_LOG_INVALID_OFFSET: 400,
  EVENT_LOG_OFFSET_OUT_OF_RANGE: 400,
  EVENT_LOG_NOT_FOUND: 404,
  RUN_ALREADY_FINISHED: 409,
  RUN_ALREADY_STARTED: 409,
  ADAPTER_CLOSED: 503,
  SANDBOX_THREAD_MOVING: 503,
}
