/**
 * The sandbox-side stores (docs/contract/instances.md, checkpoint-store.md):
 * sandbox instances, and the checkpoint store with writer leases and the
 * atomic fork.
 */
import { createHash } from 'node:crypto'

import { loadUpstreamErrors, SandboxCheckpointError, SandboxCheckpointInvalidIdError } from './errors.js'
import {
  checkTextId,
  clockValue,
  isPlainObject,
  json,
  ownUndefinedToNull,
  run,
  SP,
  value,
  type Queryable,
} from './internal.js'
import type {
  ForkCapableSandboxCheckpointStore,
  SandboxCheckpoint,
  SandboxCheckpointStoreOptions,
  SandboxCheckpointWriter,
  SandboxCheckpointWriterLease,
  SandboxInstanceRecord,
  SandboxInstanceStore,
} from './types.js'

/** `SandboxInstanceStore` (structurally also `@tanstack/ai-sandbox`'s `SandboxStore`). */
export function postgresSandboxInstances(db: Queryable): SandboxInstanceStore {
  return {
    async get(key) {
      checkTextId(key, 'key')
      return value<SandboxInstanceRecord | null>(db, `SELECT ${SP}.instance_get($1::text) AS r`, [key])
    },
    async upsert(record) {
      // Full replace; an own `latestSnapshotId: undefined` must clear (rule 4).
      await run(db, `SELECT ${SP}.instance_upsert($1::json)`, [json(ownUndefinedToNull(record))])
    },
    async delete(key) {
      checkTextId(key, 'key')
      await run(db, `SELECT ${SP}.instance_delete($1::text)`, [key])
    },
  }
}

const invalidId = (message: string) => new SandboxCheckpointInvalidIdError(message)

/** Rule 8: exactly the three writer fields, never the lease object itself. */
function writerJson(writer: unknown): unknown {
  if (!isPlainObject(writer)) return writer
  return { threadId: writer.threadId, ownerToken: writer.ownerToken, fence: writer.fence }
}

/** Rule 4 on the checkpoint header and each file entry and artifact; the conversation is separate. */
function checkpointParts(checkpoint: unknown): { header: unknown; conversation: unknown } {
  if (!isPlainObject(checkpoint)) return { header: checkpoint, conversation: undefined }
  const header: Record<string, unknown> = {}
  for (const key of Object.keys(checkpoint)) {
    if (key === 'conversation') continue
    const v = checkpoint[key]
    if ((key === 'files' || key === 'artifacts') && Array.isArray(v)) {
      header[key] = v.map((entry) => ownUndefinedToNull(entry))
    } else {
      header[key] = v === undefined ? null : v
    }
  }
  return { header, conversation: checkpoint.conversation }
}

/**
 * Delta appends (ours, 0.4.0; docs/contract/checkpoint-store.md §3.1): when a
 * conversation extends the one this store last appended on the thread, with
 * the same writer, on top of that checkpoint, only the new messages are sent
 * (`checkpoint_append_delta`) with a claim about the prefix (its length and
 * digest) that the server checks against the parent's stored conversation. A
 * refused claim (SP016) is answered by sending the whole conversation.
 *
 * - `'verified'` (the default): every message is compared, member by member,
 *   with a copy of its JSON value taken when it was appended (strings are
 *   shared, so an unchanged message costs a walk of its members, not a
 *   serialization); a message that is not plain JSON data (a `toJSON`, a
 *   class instance, an `undefined` member) is serialized and compared as
 *   text. A message changed in place is seen; only the tail is serialized,
 *   hashed and sent.
 * - `'identity'`: a message is taken as unchanged when it is the same object
 *   as the one last appended at its place, so the prefix costs nothing on
 *   the client. Only for callers that never change a message object in place
 *   once appended (they replace it): a message changed in place would be
 *   stored as it was when it was first appended.
 * - `'off'`: always the whole conversation.
 */
export type DeltaAppendMode = 'verified' | 'identity' | 'off'

export interface PostgresCheckpointOptions extends SandboxCheckpointStoreOptions {
  deltaAppends?: DeltaAppendMode
}

/** How many threads' last appends a store remembers for delta appends. */
const DELTA_THREADS = 1024

/** What a store remembers of the last append it made on a thread. */
interface LastAppend {
  headId: string
  ownerToken: unknown
  fence: unknown
  len: number
  /** The conversation's digest (docs/contract/checkpoint-store.md §6). */
  digest: Buffer
  /** Per message: the object itself ('identity') or its {@link Appended} form ('verified'). */
  prior: Array<unknown>
}

/** The JSON text of one conversation message, as JSON.stringify writes it inside the array. */
function messageText(message: unknown): string {
  return JSON.stringify(message) ?? 'null'
}

/** How 'verified' remembers an appended message: a copy of its JSON value, or its text. */
type Appended = { copy: unknown } | { text: string }

/** Marks a value that is not plain JSON data (its JSON text is not a function of its members alone). */
const NOT_PLAIN = Symbol('not plain JSON data')

/**
 * A copy of a plain JSON value (objects with Object.prototype or no
 * prototype and no toJSON, arrays without holes, strings, booleans, null,
 * finite numbers), or NOT_PLAIN. Two values with equal copies
 * ({@link sameJson}) have the same JSON.stringify text.
 */
function plainCopy(input: unknown): unknown {
  if (input === null || typeof input === 'string' || typeof input === 'boolean') return input
  if (typeof input === 'number') return Number.isFinite(input) ? input : NOT_PLAIN
  if (typeof input !== 'object') return NOT_PLAIN
  if (Array.isArray(input)) {
    const out = new Array<unknown>(input.length)
    for (let i = 0; i < input.length; i++) {
      if (!(i in input)) return NOT_PLAIN
      const c = plainCopy(input[i])
      if (c === NOT_PLAIN) return NOT_PLAIN
      out[i] = c
    }
    return out
  }
  const proto = Object.getPrototypeOf(input)
  if ((proto !== Object.prototype && proto !== null) || 'toJSON' in input) return NOT_PLAIN
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(input)) {
    const c = plainCopy((input as Record<string, unknown>)[key])
    if (c === NOT_PLAIN) return NOT_PLAIN
    out[key] = c
  }
  return out
}

/** Whether input is plain JSON data equal to copy: the same members, in the same order. */
function sameJson(copy: unknown, input: unknown): boolean {
  if (copy === null || typeof copy !== 'object') return copy === input
  if (typeof input !== 'object' || input === null) return false
  if (Array.isArray(copy)) {
    if (!Array.isArray(input) || input.length !== copy.length) return false
    for (let i = 0; i < copy.length; i++) if (!(i in input) || !sameJson(copy[i], input[i])) return false
    return true
  }
  if (Array.isArray(input)) return false
  const proto = Object.getPrototypeOf(input)
  if ((proto !== Object.prototype && proto !== null) || 'toJSON' in input) return false
  const keys = Object.keys(copy)
  const inputKeys = Object.keys(input)
  if (keys.length !== inputKeys.length) return false
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string
    if (inputKeys[i] !== key) return false
    if (!sameJson((copy as Record<string, unknown>)[key], (input as Record<string, unknown>)[key])) return false
  }
  return true
}

/** The 'verified' memory of an appended message whose text is given. */
function appended(message: unknown, text: string): Appended {
  const copy = plainCopy(message)
  return copy === NOT_PLAIN ? { text } : { copy }
}

/** Whether a message is still the one 'verified' remembered. */
function unchanged(prior: Appended, message: unknown): boolean {
  return 'copy' in prior ? sameJson(prior.copy, message) : messageText(message) === prior.text
}

/** Extend a conversation digest (d = sha256(d || sha256(text))) by the given messages. */
function chainDigest(digest: Buffer, texts: ReadonlyArray<string>): Buffer {
  let d = digest
  for (const text of texts) {
    const h = createHash('sha256').update(text, 'utf8').digest()
    d = createHash('sha256').update(d).update(h).digest()
  }
  return d
}

/** The digest of no messages: sha256 of nothing. */
const EMPTY_DIGEST = createHash('sha256').digest()

/** The checkpoint store contract wants a plain Error for a bad option [R23]; it still carries a code. */
function invalidOption(code: 'ERR_INVALID_ARG_TYPE' | 'ERR_OUT_OF_RANGE', message: string): Error {
  return Object.defineProperty(new Error(message), 'code', { value: code, enumerable: true })
}

/** The lease options and the test clock, checked. */
function leaseSettings(options: PostgresCheckpointOptions): { leaseDurationMs: number; renewAfterMs: number; now: (() => number) | undefined } {
  const leaseDurationMs = options.leaseDurationMs ?? 120_000
  const renewAfterMs = options.renewAfterMs ?? 45_000
  const invalid = invalidOption
  if (typeof leaseDurationMs !== 'number') {
    throw invalid('ERR_INVALID_ARG_TYPE', `leaseDurationMs must be a finite number greater than 0, got ${String(leaseDurationMs)}.`)
  }
  if (!Number.isFinite(leaseDurationMs) || leaseDurationMs <= 0) {
    throw invalid('ERR_OUT_OF_RANGE', `leaseDurationMs must be a finite number greater than 0, got ${String(leaseDurationMs)}.`)
  }
  if (!Number.isSafeInteger(leaseDurationMs)) {
    throw invalid('ERR_OUT_OF_RANGE', `leaseDurationMs must be an integral number of milliseconds, got ${String(leaseDurationMs)}.`)
  }
  if (typeof renewAfterMs !== 'number') {
    throw invalid('ERR_INVALID_ARG_TYPE', `renewAfterMs must be a finite number greater than 0, got ${String(renewAfterMs)}.`)
  }
  if (!Number.isFinite(renewAfterMs) || renewAfterMs <= 0) {
    throw invalid('ERR_OUT_OF_RANGE', `renewAfterMs must be a finite number greater than 0, got ${String(renewAfterMs)}.`)
  }
  if (renewAfterMs >= leaseDurationMs) {
    throw invalid('ERR_OUT_OF_RANGE', `renewAfterMs (${renewAfterMs}) must be less than leaseDurationMs (${leaseDurationMs}).`)
  }
  if (options.now !== undefined && typeof options.now !== 'function') {
    throw invalid('ERR_INVALID_ARG_TYPE', 'now must be a function returning epoch milliseconds.')
  }
  return { leaseDurationMs, renewAfterMs, now: options.now }
}

/**
 * The checkpoint store, fork-capable. Lease times come from the server clock
 * unless `options.now` is given, in which case `now_ms = options.now()` is sent
 * on acquire, renew, append, deleteHead and fork (the database must have
 * `sandbox_persist.allow_client_clock = on`, a test setting).
 */
export function postgresCheckpoints(
  db: Queryable,
  options: PostgresCheckpointOptions = {},
): ForkCapableSandboxCheckpointStore {
  const { leaseDurationMs, renewAfterMs, now } = leaseSettings(options)
  // The installed @tanstack/ai-sandbox's error classes, when there are any
  // (errors.ts): every method waits for the one dynamic import, so each error
  // the store raises is an instance of upstream's class too.
  const upstream = loadUpstreamErrors()

  const deltaMode: DeltaAppendMode = options.deltaAppends ?? 'verified'
  if (deltaMode !== 'verified' && deltaMode !== 'identity' && deltaMode !== 'off') {
    throw invalidOption('ERR_INVALID_ARG_TYPE', `deltaAppends must be 'verified', 'identity' or 'off', got ${String(deltaMode)}.`)
  }
  const appender = new CheckpointAppender(db, deltaMode, now)

  return afterUpstream(upstream, {
    async get(id) {
      checkTextId(id, 'checkpoint id', invalidId)
      // the conversation arrives a block a row: a long one as one value costs more to move
      const { rows } = await run(db, `SELECT ${SP}.checkpoint_get_parts($1::text) AS r`, [id])
      if (rows.length === 0) return null
      const record = (rows[0] as { r: SandboxCheckpoint }).r
      const conversation = record.conversation as Array<unknown>
      for (let i = 1; i < rows.length; i++) {
        for (const message of (rows[i] as { r: Array<unknown> }).r) conversation.push(message)
      }
      return record
    },

    async list(threadId) {
      checkTextId(threadId, 'threadId', invalidId)
      return (await value<Array<SandboxCheckpoint> | null>(db, `SELECT ${SP}.checkpoint_list($1::text) AS r`, [threadId])) ?? []
    },

    async getHead(threadId) {
      checkTextId(threadId, 'threadId', invalidId)
      return value<string | null>(db, `SELECT ${SP}.checkpoint_get_head($1::text) AS r`, [threadId])
    },

    async append(input) {
      return appender.append(input)
    },

    async deleteHead(input) {
      const source = input as unknown
      const payload = isPlainObject(source)
        ? { threadId: source.threadId, checkpointId: source.checkpointId, writer: writerJson(source.writer) }
        : source
      if (isPlainObject(source) && typeof source.threadId === 'string') appender.forget(source.threadId)
      await run(db, `SELECT ${SP}.checkpoint_delete_head($1::json, $2::bigint)`, [json(payload), clockValue(now)])
    },

    async acquireWriter(threadId) {
      checkTextId(threadId, 'threadId', invalidId)
      const acquired = await value<SandboxCheckpointWriter & { expiresAt: number }>(
        db,
        `SELECT ${SP}.checkpoint_acquire_writer($1::text, $2::bigint, $3::bigint) AS r`,
        [threadId, leaseDurationMs, clockValue(now)],
      )
      return writerLease(db, acquired, leaseDurationMs, renewAfterMs, now)
    },

    async listBlobReferences() {
      return (
        (await value<Array<{ key: string; references: number }> | null>(
          db,
          `SELECT ${SP}.checkpoint_list_blob_references() AS r`,
          [],
        )) ?? []
      )
    },

    async forkFromCheckpoint(input) {
      return value<{ checkpoint: SandboxCheckpoint }>(
        db,
        `SELECT ${SP}.checkpoint_fork_from_checkpoint($1::json, $2::bigint) AS r`,
        [json(forkPayload(input)), clockValue(now)],
      )
    },
  })
}

/** forkFromCheckpoint's argument as the server takes it (anything else is sent as given, for the server to refuse). */
function forkPayload(input: unknown): unknown {
  const source = input
  return isPlainObject(source)
    ? {
        sourceThreadId: source.sourceThreadId,
        sourceCheckpointId: source.sourceCheckpointId,
        destinationThreadId: source.destinationThreadId,
        destinationCheckpointId: source.destinationCheckpointId,
        createdAt: source.createdAt,
        writer: writerJson(source.writer),
      }
    : source
}

/** The lease acquireWriter returns: renew (checkpoint_renew_writer) and release (checkpoint_release_writer). */
function writerLease(
  db: Queryable,
  acquired: SandboxCheckpointWriter & { expiresAt: number },
  leaseDurationMs: number,
  renewAfterMs: number,
  now: (() => number) | undefined,
): SandboxCheckpointWriterLease {
  const writer = { threadId: acquired.threadId, ownerToken: acquired.ownerToken, fence: acquired.fence }
  const writerText = JSON.stringify(writer)
  let expiresAt = acquired.expiresAt
  const lease: SandboxCheckpointWriterLease = {
    threadId: writer.threadId,
    ownerToken: writer.ownerToken,
    fence: writer.fence,
    get expiresAt() {
      return expiresAt
    },
    renewAfterMs,
    async renew() {
      const renewed = await value<{ expiresAt: number }>(
        db,
        `SELECT ${SP}.checkpoint_renew_writer($1::json, $2::bigint, $3::bigint) AS r`,
        [writerText, leaseDurationMs, clockValue(now)],
      )
      expiresAt = renewed.expiresAt
      return { expiresAt: renewed.expiresAt }
    },
    async release() {
      await run(db, `SELECT ${SP}.checkpoint_release_writer($1::json)`, [writerText])
    },
  }
  return lease
}

/**
 * The checkpoint store's appends (checkpoint_append, checkpoint_append_delta):
 * it remembers each thread's last append (up to DELTA_THREADS threads) and,
 * when the next one extends it with the same writer and head, sends only the
 * new messages (docs/contract/checkpoint-store.md §6).
 */
class CheckpointAppender {
  private readonly lastAppends = new Map<string, LastAppend>()

  constructor(
    private readonly db: Queryable,
    private readonly deltaMode: DeltaAppendMode,
    private readonly now: (() => number) | undefined,
  ) {}

  /** Forget a thread's last append (its head changed some other way). */
  forget(threadId: string): void {
    this.lastAppends.delete(threadId)
  }

  async append(input: unknown): Promise<{ headId: string }> {
    const { db, now } = this
    const source = input as unknown
    let payload: unknown = source
    let conversation: unknown = undefined
    let header: unknown = undefined
    if (isPlainObject(source)) {
      const parts = checkpointParts(source.checkpoint)
      conversation = parts.conversation
      header = parts.header
      // expectedHeadId is copied as given: undefined (absent) is INVALID_ID, null is "no head".
      payload = { checkpoint: parts.header, expectedHeadId: source.expectedHeadId, writer: writerJson(source.writer) }
    }
    if (this.deltaMode === 'off' || !Array.isArray(conversation) || !isPlainObject(header) || !isPlainObject(source)) {
      return value<{ headId: string }>(db, `SELECT ${SP}.checkpoint_append($1::json, $2::json, $3::bigint) AS r`, [
        json(payload),
        json(conversation),
        clockValue(now),
      ])
    }
    const messages: Array<unknown> = conversation
    const threadId = header.threadId
    const writer = isPlainObject(source.writer) ? source.writer : {}
    const last = typeof threadId === 'string' ? this.lastAppends.get(threadId) : undefined
    if (
      last !== undefined &&
      typeof threadId === 'string' &&
      source.expectedHeadId === last.headId &&
      header.parentCheckpointId === last.headId &&
      writer.ownerToken === last.ownerToken &&
      writer.fence === last.fence &&
      messages.length >= last.len &&
      this.samePrefix(last, messages)
    ) {
      const result = await this.appendDelta(payload, threadId, writer, messages, last)
      if (result !== null) return result
    }
    const texts = Array.from(messages, messageText)
    const priors = this.priorsOf(messages, texts, 0)
    if (typeof threadId === 'string') this.lastAppends.delete(threadId)
    const result = await value<{ headId: string }>(db, `SELECT ${SP}.checkpoint_append($1::json, $2::json, $3::bigint) AS r`, [
      json(payload),
      `[${texts.join(',')}]`,
      clockValue(now),
    ])
    if (typeof threadId === 'string') this.remember(threadId, result.headId, writer, messages.length, texts, priors, undefined)
    return result
  }

  /** The new messages only; null when the server holds another conversation for the parent (then send it whole). */
  private async appendDelta(
    payload: unknown,
    threadId: string,
    writer: Record<string, unknown>,
    messages: Array<unknown>,
    last: LastAppend,
  ): Promise<{ headId: string } | null> {
    // Array.from, not map: a hole in the tail is sent as null, as in the whole form.
    const tail = Array.from(messages.slice(last.len), messageText)
    const priors = this.priorsOf(messages, tail, last.len)
    try {
      const result = await value<{ headId: string }>(
        this.db,
        `SELECT ${SP}.checkpoint_append_delta($1::json, $2::json, $3::bigint, $4::bytea, $5::bigint) AS r`,
        [json(payload), `[${tail.join(',')}]`, last.len, last.digest, clockValue(this.now)],
      )
      this.remember(threadId, result.headId, writer, messages.length, tail, priors, last)
      return result
    } catch (error) {
      this.lastAppends.delete(threadId)
      // A false claim: the server holds another conversation for the parent; send it whole.
      if (!(error instanceof SandboxCheckpointError && error.code === 'SANDBOX_SNAPSHOT_PREFIX_MISMATCH')) throw error
      return null
    }
  }

  /** Whether the first last.len messages are the ones last appended. */
  private samePrefix(last: LastAppend, messages: ReadonlyArray<unknown>): boolean {
    for (let i = 0; i < last.len; i++) {
      const prior = last.prior[i]
      if (this.deltaMode === 'identity' ? messages[i] !== prior : !unchanged(prior as Appended, messages[i])) return false
    }
    return true
  }

  /**
   * What the store remembers of messages[from..] (texts: their JSON texts),
   * taken before the call that sends them: a message changed in place while
   * the call is in flight is then seen as changed on the next append.
   */
  private priorsOf(messages: ReadonlyArray<unknown>, texts: ReadonlyArray<string>, from: number): Array<unknown> {
    return texts.map((text, i) => (this.deltaMode === 'identity' ? messages[from + i] : appended(messages[from + i], text)))
  }

  /**
   * Remember a successful append for the thread's next one (the oldest thread
   * is forgotten first): texts and priors are those of messages[base.len..],
   * base the last append this one extended (undefined: the whole conversation).
   */
  private remember(
    threadId: string,
    headId: string,
    writer: Record<string, unknown>,
    len: number,
    texts: ReadonlyArray<string>,
    priors: ReadonlyArray<unknown>,
    base: LastAppend | undefined,
  ): void {
    const lastAppends = this.lastAppends
    const prior = base?.prior ?? []
    prior.length = base?.len ?? 0
    for (const p of priors) prior.push(p)
    lastAppends.delete(threadId)
    if (lastAppends.size >= DELTA_THREADS) {
      const oldest = lastAppends.keys().next()
      if (!oldest.done) lastAppends.delete(oldest.value)
    }
    lastAppends.set(threadId, {
      headId,
      ownerToken: writer.ownerToken,
      fence: writer.fence,
      len,
      digest: chainDigest(base?.digest ?? EMPTY_DIGEST, texts),
      prior,
    })
  }
}

/** `store` with every method first awaiting `ready`. */
function afterUpstream<T extends object>(ready: Promise<void>, store: T): T {
  const methods = store as Record<string, unknown>
  for (const [name, method] of Object.entries(methods)) {
    if (typeof method !== 'function') continue
    methods[name] = async function (this: unknown, ...args: unknown[]) {
      await ready
      return (method as (...a: unknown[]) => unknown).apply(this, args)
    }
  }
  return store
}
