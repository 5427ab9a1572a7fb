/**
 * Errors thrown by the adapter, one family under `SandboxPersistError`, and
 * the translation of PostgreSQL errors into them by SQLSTATE
 * (docs/contract/README.md §4; the class-SP table is error_codes.ts,
 * generated from the extension's src/errors.h).
 */
import { SP_ERRORS, type SandboxCheckpointErrorCode, type SandboxPersistServerErrorCode, type SpSqlState } from './error_codes.js'

export type { SandboxCheckpointErrorCode } from './error_codes.js'

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
  /** No SQLSTATE: an optional peer package a function builds on is not installed (`SandboxPersistPeerError`). */
  | 'PEER_NOT_INSTALLED'
  /** No SQLSTATE: the installed optional peer lacks the export a function builds on (`SandboxPersistPeerError`). */
  | 'PEER_EXPORT_MISSING'

/**
 * Every code a `SandboxPersistError` can carry: the server's class-SP codes
 * (generated from src/errors.h), the adapter's own below, and the set-up codes.
 */
export type SandboxPersistErrorCode =
  | SandboxPersistServerErrorCode
  /** A resume offset that is malformed or another run's (the adapter checks it before any call): a route answers 400. */
  | 'EVENT_LOG_INVALID_OFFSET'
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
  /** `withLock` waited longer than `acquireTimeoutMs` (`LockAcquireTimeoutError`). */
  | 'LOCK_ACQUIRE_TIMEOUT'
  /** The abort reason of a `withLock` signal once the lock is no longer guaranteed (`LockLostError`). */
  | 'LOCK_LOST'
  /** Class 22: the server refused the input (`SandboxPersistInputError`, also a `TypeError`). */
  | 'INVALID_INPUT'
  /** 22003, 54000 and a call's range errors: a value out of range (`SandboxPersistRangeError`, also a `RangeError`). */
  | 'INPUT_OUT_OF_RANGE'
  | SandboxPersistSetupErrorCode

/** The fields of a `SandboxPersistError` besides `code` and `message`. */
export interface SandboxPersistErrorFields extends ErrorOptions {
  /** The SQLSTATE of the database error, when there is one. */
  sqlstate?: string
  /** The server's DETAIL: a sentence for people. */
  detail?: string
  /** What the caller can do: the server's HINT, or the table's (error_codes.ts). */
  hint?: string
}

/** Marks an error whose prototype chain was re-rooted (`alsoInstanceOf`) with the adapter class it is. */
const FAMILY = Symbol.for('@sandbox-persist/tanstack-ai.class')

/**
 * The one base of every error the adapter raises from the database, and of its
 * own (ADAPTER_CLOSED, EVENT_LOG_INVALID_OFFSET, BLOB_VERSION_CHANGED,
 * RUN_ID_REQUIRED, INVALID_RUN_ID, RUN_ALREADY_FINISHED, RUN_ALREADY_STARTED,
 * LOCK_ACQUIRE_TIMEOUT, LOCK_LOST, ...): `code` is the contract's code name,
 * `sqlstate`, `detail` and `hint` come from the server (undefined for the
 * adapter's own), `cause` is the driver error. All five are own, enumerable
 * properties, as on node-postgres's `DatabaseError`, so they survive logging
 * and `structuredClone`.
 *
 * The SQLSTATE is the key: a class-SP SQLSTATE maps to its code through
 * `SP_ERRORS` (error_codes.ts, generated from the extension's error table).
 */
export class SandboxPersistError extends Error {
  readonly code: SandboxPersistErrorCode | SandboxCheckpointErrorCode
  readonly sqlstate: string | undefined
  readonly detail: string | undefined
  readonly hint: string | undefined
  /**
   * `new SandboxPersistError(code, message, { sqlstate, detail, hint, cause })`;
   * the 0.3 form `(code, message, sqlstate, detail, { cause })` still works.
   */
  constructor(
    code: SandboxPersistErrorCode | SandboxCheckpointErrorCode,
    message: string,
    fields?: string | SandboxPersistErrorFields,
    detail?: string,
    options?: SandboxPersistErrorFields,
  ) {
    const f: SandboxPersistErrorFields =
      typeof fields === 'object' && fields !== null ? fields : { ...options, sqlstate: fields, detail }
    super(message, 'cause' in f ? { cause: f.cause } : undefined)
    this.name = 'SandboxPersistError'
    this.code = code
    this.sqlstate = f.sqlstate
    this.detail = f.detail
    this.hint = f.hint
    Object.defineProperty(this, 'cause', { value: f.cause, enumerable: true, writable: true, configurable: true })
  }

  /** Also true for an error re-rooted onto another class (a TypeError, an upstream class) that is one of ours. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    if (Function.prototype[Symbol.hasInstance].call(this, value)) return true
    if (typeof value !== 'object' || value === null) return false
    const own = (value as { [FAMILY]?: unknown })[FAMILY]
    return typeof own === 'function' && (own === this || Object.prototype.isPrototypeOf.call(this.prototype, own.prototype))
  }
}

/** Prototypes made by `alsoInstanceOf`, per adapter class and foreign class. */
const rerooted = new WeakMap<object, WeakMap<object, object>>()

/**
 * Make `error` (an instance of the adapter's class `Own`) an instance of
 * `Other` too: its prototype chain is re-rooted on `Other.prototype`, and
 * `Own`'s `instanceof` (and its bases') still answers true through `FAMILY`.
 * Own properties (code, sqlstate, detail, hint, cause, name) are unchanged.
 */
function alsoInstanceOf<T extends Error>(error: T, Own: Function, Other: Function): T {
  let byOther = rerooted.get(Own)
  if (byOther === undefined) {
    byOther = new WeakMap()
    rerooted.set(Own, byOther)
  }
  let proto = byOther.get(Other)
  if (proto === undefined) {
    proto = Object.create(Other.prototype as object, { constructor: { value: Own, writable: true, configurable: true } }) as object
    byOther.set(Other, proto)
  }
  Object.setPrototypeOf(error, proto)
  Object.defineProperty(error, FAMILY, { value: Own, enumerable: false })
  return error
}

/** Upstream's checkpoint error classes by export name, once `@tanstack/ai-sandbox` was loaded (null: absent). */
let upstreamClasses: Record<string, Function> | null = null
let upstreamLoad: Promise<void> | undefined
/** The optional peer whose `SandboxCheckpoint*Error` classes the store's errors also belong to. */
const UPSTREAM_SANDBOX = '@tanstack/ai-sandbox'

/**
 * Use the `SandboxCheckpoint*Error` classes `mod` exports for the checkpoint
 * store's errors from now on (`undefined`: none). The checkpoint store calls
 * it with the installed `@tanstack/ai-sandbox` (`loadUpstreamErrors`); tests
 * with a stand-in.
 */
export function useUpstreamErrors(mod: Record<string, unknown> | undefined): void {
  const found: Record<string, Function> = {}
  for (const [name, value] of Object.entries(mod ?? {})) {
    if (/^SandboxCheckpoint[A-Za-z]*Error$/.test(name) && typeof value === 'function' && value.prototype instanceof Error) {
      found[name] = value as Function
    }
  }
  upstreamClasses = Object.keys(found).length > 0 ? found : null
}

/**
 * Load the installed `@tanstack/ai-sandbox` once (a dynamic import of an
 * optional peer: absent, or without the classes, means no interop) and
 * resolve when done; never rejects.
 */
export function loadUpstreamErrors(specifier: string = UPSTREAM_SANDBOX): Promise<void> {
  upstreamLoad ??= import(specifier).then(
    (mod: Record<string, unknown>) => useUpstreamErrors(mod),
    () => undefined,
  )
  return upstreamLoad
}

/** Resolves once a started `loadUpstreamErrors` is over (at once when none was started). */
export function upstreamErrorsSettled(): Promise<void> {
  return upstreamLoad ?? Promise.resolve()
}

/** Re-root a checkpoint error onto upstream's class of the same name (or its base), when upstream is loaded. */
function alsoUpstream(error: SandboxCheckpointError, Own: Function): void {
  if (upstreamClasses === null) return
  const Other = upstreamClasses[Own.name] ?? upstreamClasses.SandboxCheckpointError
  if (Other !== undefined) alsoInstanceOf(error, Own, Other)
}

/**
 * SP101-SP103 from `interrupt_commit_batch`: `message` is exactly upstream's
 * text (its in-memory store throws a plain `Error` with it).
 */
export class InterruptBatchError extends SandboxPersistError {
  declare readonly code: Extract<SandboxPersistServerErrorCode, `INTERRUPT_BATCH_${string}`>
  constructor(code: InterruptBatchError['code'], message: string, fields?: SandboxPersistErrorFields) {
    super(code, message, fields)
    this.name = 'InterruptBatchError'
  }
}

/**
 * Bad input the server refused with a class-22 SQLSTATE (`INVALID_INPUT`);
 * the instances the adapter raises are also `TypeError`s, as before 0.4.
 */
export class SandboxPersistInputError extends SandboxPersistError {
  declare readonly code: 'INVALID_INPUT' | 'INPUT_OUT_OF_RANGE'
  constructor(message: string, fields?: SandboxPersistErrorFields, code: 'INVALID_INPUT' | 'INPUT_OUT_OF_RANGE' = 'INVALID_INPUT') {
    super(code, message, fields)
    this.name = 'SandboxPersistInputError'
  }
}

/**
 * A value out of range (22003, 54000, and per call the range errors of blob
 * reads): `INPUT_OUT_OF_RANGE`; the instances the adapter raises are also
 * `RangeError`s, as before 0.4.
 */
export class SandboxPersistRangeError extends SandboxPersistInputError {
  declare readonly code: 'INPUT_OUT_OF_RANGE'
  constructor(message: string, fields?: SandboxPersistErrorFields) {
    super(message, fields, 'INPUT_OUT_OF_RANGE')
    this.name = 'SandboxPersistRangeError'
  }
}

/**
 * Every code the checkpoint store raises: an instance of this class or of one
 * of the upstream-named subclasses below, and so a `SandboxPersistError`
 * (`sqlstate`, `detail`, `hint`, `cause`). When the installed
 * `@tanstack/ai-sandbox` exports its own `SandboxCheckpoint*Error` classes,
 * every instance is also an instance of the upstream class of the same name
 * (or of upstream's `SandboxCheckpointError` for the codes upstream has no
 * class for), so an app that decides by `instanceof` on upstream's classes
 * sees the store's errors as its own.
 */
export class SandboxCheckpointError extends SandboxPersistError {
  declare readonly code: SandboxCheckpointErrorCode
  constructor(code: SandboxCheckpointErrorCode, message: string, options?: SandboxPersistErrorFields) {
    super(code, message, options)
    this.name = 'SandboxCheckpointError'
    alsoUpstream(this, new.target)
  }
}

/** The constructor of a checkpoint error class of one code (declared so the classes' types name their base). */
type CheckpointErrorClass<C extends SandboxCheckpointErrorCode> = new (
  message: string,
  options?: SandboxPersistErrorFields,
) => SandboxCheckpointError & { readonly code: C }

/**
 * A `SandboxCheckpointError` of one fixed code and class name: the base of the
 * upstream-named classes below, which are generated from the error table and
 * the names upstream gave them, so each is one line.
 */
function checkpointErrorClass<C extends SandboxCheckpointErrorCode>(code: C, name: string): CheckpointErrorClass<C> {
  return class extends SandboxCheckpointError {
    declare readonly code: C
    constructor(message: string, options?: SandboxPersistErrorFields) {
      super(code, message, options)
      this.name = name
    }
  }
}

// generated by scripts/gen_error_codes.sh from src/errors.h: begin
/** SP001 `SANDBOX_SNAPSHOT_STALE_HEAD`: Reload the thread's head checkpoint and append after it. */
export class SandboxCheckpointConflictError extends checkpointErrorClass('SANDBOX_SNAPSHOT_STALE_HEAD', 'SandboxCheckpointConflictError') {}
/** SP002 `SANDBOX_SNAPSHOT_PARENT_MISMATCH`: Set the checkpoint's parentCheckpointId to the head the append expects (expectedHeadId). */
export class SandboxCheckpointParentMismatchError extends checkpointErrorClass('SANDBOX_SNAPSHOT_PARENT_MISMATCH', 'SandboxCheckpointParentMismatchError') {}
/** SP003 `SANDBOX_SNAPSHOT_DUPLICATE_ID`: Give the checkpoint an id that no existing checkpoint of any thread has; the id of a deleted head may be used again. */
export class SandboxCheckpointDuplicateIdError extends checkpointErrorClass('SANDBOX_SNAPSHOT_DUPLICATE_ID', 'SandboxCheckpointDuplicateIdError') {}
/** SP004 `SANDBOX_SNAPSHOT_NOT_HEAD`: Reload the thread's head: only the current head can be deleted. */
export class SandboxCheckpointNotHeadError extends checkpointErrorClass('SANDBOX_SNAPSHOT_NOT_HEAD', 'SandboxCheckpointNotHeadError') {}
/** SP005 `SANDBOX_SNAPSHOT_WRITER_CONFLICT`: Wait until the other writer releases its lease or the lease expires, then acquire the writer again. */
export class SandboxCheckpointWriterConflictError extends checkpointErrorClass('SANDBOX_SNAPSHOT_WRITER_CONFLICT', 'SandboxCheckpointWriterConflictError') {}
/** SP006 `SANDBOX_SNAPSHOT_WRITER_LOST`: Acquire the writer lease again and reload the thread's head before writing. */
export class SandboxCheckpointWriterLostError extends checkpointErrorClass('SANDBOX_SNAPSHOT_WRITER_LOST', 'SandboxCheckpointWriterLostError') {}
/** SP007 `SANDBOX_SNAPSHOT_INVALID_ID` */
export class SandboxCheckpointInvalidIdError extends checkpointErrorClass('SANDBOX_SNAPSHOT_INVALID_ID', 'SandboxCheckpointInvalidIdError') {}
/** SP008 `SANDBOX_SNAPSHOT_INVALID_ENTRY` */
export class SandboxCheckpointInvalidEntryError extends checkpointErrorClass('SANDBOX_SNAPSHOT_INVALID_ENTRY', 'SandboxCheckpointInvalidEntryError') {}

/** The upstream-named class of each checkpoint code that has one. */
const CHECKPOINT_CLASSES: Partial<Record<SandboxCheckpointErrorCode, new (message: string, options?: SandboxPersistErrorFields) => SandboxCheckpointError>> = {
  SANDBOX_SNAPSHOT_STALE_HEAD: SandboxCheckpointConflictError,
  SANDBOX_SNAPSHOT_PARENT_MISMATCH: SandboxCheckpointParentMismatchError,
  SANDBOX_SNAPSHOT_DUPLICATE_ID: SandboxCheckpointDuplicateIdError,
  SANDBOX_SNAPSHOT_NOT_HEAD: SandboxCheckpointNotHeadError,
  SANDBOX_SNAPSHOT_WRITER_CONFLICT: SandboxCheckpointWriterConflictError,
  SANDBOX_SNAPSHOT_WRITER_LOST: SandboxCheckpointWriterLostError,
  SANDBOX_SNAPSHOT_INVALID_ID: SandboxCheckpointInvalidIdError,
  SANDBOX_SNAPSHOT_INVALID_ENTRY: SandboxCheckpointInvalidEntryError,
}
// generated by scripts/gen_error_codes.sh: end

/**
 * SP405: the event log cannot vouch for a resume offset: the server holds no
 * entry there, or other entries up to it, as after a failover to a standby
 * that lacked acknowledged appends (docs/contract/failover.md §2). The reader
 * must not continue from that offset: replay from the start (`'-1'`) or
 * report the stream as broken.
 */
export class EventLogOffsetDivergedError extends SandboxPersistError {
  declare readonly code: 'EVENT_LOG_OFFSET_DIVERGED'
  constructor(message: string, sqlstate: string | SandboxPersistErrorFields, detail?: string, options?: SandboxPersistErrorFields) {
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
  declare readonly hint: string
  constructor(code: SandboxPersistSetupErrorCode, message: string, hint: string, sqlstate?: string, options?: ErrorOptions) {
    super(code, `${message} Hint: ${hint}`, { ...options, sqlstate, hint })
    this.name = 'SandboxPersistSetupError'
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
  constructor(message: string, sqlstate: string | SandboxPersistErrorFields, detail?: string, options?: SandboxPersistErrorFields) {
    super('LEASE_ROW_BUSY', message, sqlstate, detail, options)
    this.name = 'LeaseRowBusyError'
  }
}

/** `withLock` waited longer than `acquireTimeoutMs` [L18]. */
export class LockAcquireTimeoutError extends SandboxPersistError {
  declare readonly code: 'LOCK_ACQUIRE_TIMEOUT'
  readonly key: string
  readonly timeoutMs: number
  constructor(key: string, timeoutMs: number) {
    super('LOCK_ACQUIRE_TIMEOUT', `Timed out after ${timeoutMs} ms waiting for lock ${JSON.stringify(key)}.`, {
      hint: 'Retry later, or raise acquireTimeoutMs.',
    })
    this.name = 'LockAcquireTimeoutError'
    this.key = key
    this.timeoutMs = timeoutMs
  }
}

/** The abort reason of a `withLock` signal once ownership is not guaranteed [L16], or the store closes under it. */
export class LockLostError extends SandboxPersistError {
  declare readonly code: 'LOCK_LOST'
  readonly key: string
  readonly why: 'lost' | 'deadline' | 'closed'
  constructor(key: string, why: 'lost' | 'deadline' | 'closed') {
    super(
      'LOCK_LOST',
      why === 'lost'
        ? `Lock ${JSON.stringify(key)} was lost: the lease expired or was taken over.`
        : why === 'closed'
          ? `Lock ${JSON.stringify(key)} is being released: the lock store was closed and fn did not finish within closeTimeoutMs.`
          : `Lock ${JSON.stringify(key)} can no longer be guaranteed: no renewal was confirmed before the local deadline.`,
      { hint: 'Stop the work guarded by the lock; acquire the lock again before redoing it.' },
    )
    this.name = 'LockLostError'
    this.key = key
    this.why = why
  }
}

/** The code name and hint of a class-SP SQLSTATE, or undefined for one this package does not know (a newer extension). */
function spEntry(sqlstate: string): { code: string; hint: string | undefined } | undefined {
  return Object.prototype.hasOwnProperty.call(SP_ERRORS, sqlstate) ? SP_ERRORS[sqlstate as SpSqlState] : undefined
}

/** The fields of a node-postgres `DatabaseError` this module reads. */
interface PgErrorLike {
  code?: unknown
  message: string
  detail?: unknown
  hint?: unknown
}

export function isDatabaseError(error: unknown): error is PgErrorLike & { code: string } {
  return (
    error instanceof Error &&
    typeof (error as PgErrorLike).code === 'string' &&
    /^[0-9A-Z]{5}$/.test((error as PgErrorLike).code as string) &&
    // Node's system errors (EPIPE, ...) also have five capitals, and a syscall
    (error as { syscall?: unknown }).syscall === undefined
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

/**
 * An optional peer package that a function loads when it is called is missing,
 * or lacks the export the function builds on (`postgresSandboxSnapshots` and
 * `@tanstack/ai-sandbox`'s `createSandboxSnapshots`). Nothing was changed.
 */
export class SandboxPersistPeerError extends SandboxPersistSetupError {
  declare readonly code: 'PEER_NOT_INSTALLED' | 'PEER_EXPORT_MISSING'
  /** The package, e.g. `@tanstack/ai-sandbox`. */
  readonly peer: string
  /** The export that is missing (`PEER_EXPORT_MISSING`), or the one that was wanted. */
  readonly missingExport: string
  constructor(
    code: 'PEER_NOT_INSTALLED' | 'PEER_EXPORT_MISSING',
    peer: string,
    missingExport: string,
    message: string,
    hint: string,
    options?: ErrorOptions,
  ) {
    super(code, message, hint, undefined, options)
    this.name = 'SandboxPersistPeerError'
    this.peer = peer
    this.missingExport = missingExport
  }
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
 * (docs/contract/README.md §4): the SQLSTATE decides the class and `code`
 * (`SP_ERRORS` for class SP); the server's DETAIL, a sentence, is the
 * message's tail (the message itself for the texts upstream fixes), and its
 * HINT (or the table's) is `hint`.
 */
export function translateError(error: unknown, context: ErrorContext = {}): unknown {
  if (!isDatabaseError(error)) return error
  const sqlstate = error.code
  const detail = typeof error.detail === 'string' ? error.detail : undefined
  const serverHint = typeof error.hint === 'string' ? error.hint : undefined

  const setup = setupError(sqlstate, error.message, error)
  if (setup !== null) return setup

  if (sqlstate.startsWith('SP')) {
    const entry = spEntry(sqlstate)
    const fields: SandboxPersistErrorFields = { sqlstate, detail, hint: serverHint ?? entry?.hint, cause: error }
    const sentence = detail ?? error.message
    const code = entry?.code ?? 'UNKNOWN_SP_ERROR'
    if (code.startsWith('SANDBOX_SNAPSHOT_')) {
      const Ctor = CHECKPOINT_CLASSES[code as SandboxCheckpointErrorCode]
      return Ctor ? new Ctor(sentence, fields) : new SandboxCheckpointError(code as SandboxCheckpointErrorCode, sentence, fields)
    }
    if (code.startsWith('INTERRUPT_BATCH_')) {
      // Upstream's in-memory store throws exactly this text.
      return new InterruptBatchError(code as InterruptBatchError['code'], sentence, fields)
    }
    const message = `${error.message}: ${sentence}`
    if (code === 'EVENT_LOG_OFFSET_DIVERGED') return new EventLogOffsetDivergedError(message, fields)
    if (code === 'LEASE_ROW_BUSY') return new LeaseRowBusyError(message, fields)
    return new SandboxPersistError(code as SandboxPersistErrorCode, message, fields)
  }

  const useDetail = detail !== undefined && (context.detailIsMessage ?? []).includes(sqlstate)
  const message = useDetail ? (detail as string) : detail ? `${error.message}: ${detail}` : error.message
  const fields: SandboxPersistErrorFields = { sqlstate, detail, hint: serverHint, cause: error }
  if (sqlstate === '22003' || sqlstate === '54000' || (context.rangeErrors ?? []).includes(sqlstate)) {
    const e = new SandboxPersistRangeError(message, fields)
    return alsoInstanceOf(e, SandboxPersistRangeError, RangeError)
  }
  if (sqlstate.startsWith('22')) {
    const e = new SandboxPersistInputError(message, fields)
    return alsoInstanceOf(e, SandboxPersistInputError, TypeError)
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
