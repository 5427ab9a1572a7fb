/**
 * The sandbox-side stores (docs/contract/instances.md, checkpoint-store.md):
 * sandbox instances, and the checkpoint store with writer leases and the
 * atomic fork.
 */
import { loadUpstreamErrors, SandboxCheckpointInvalidIdError } from './errors.js'
import {
  checkTextId,
  clockValue,
  isPlainObject,
  json,
  ownUndefinedToNull,
  run,
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

const SP = 'sandbox_persist'

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

export interface PostgresCheckpointOptions extends SandboxCheckpointStoreOptions {}

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
  const leaseDurationMs = options.leaseDurationMs ?? 120_000
  const renewAfterMs = options.renewAfterMs ?? 45_000
  // The checkpoint store contract wants a plain Error here [R23]; it still carries a code.
  const invalid = (code: 'ERR_INVALID_ARG_TYPE' | 'ERR_OUT_OF_RANGE', message: string) =>
    Object.defineProperty(new Error(message), 'code', { value: code, enumerable: true })
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
  const now = options.now
  // The installed @tanstack/ai-sandbox's error classes, when there are any
  // (errors.ts): every method waits for the one dynamic import, so each error
  // the store raises is an instance of upstream's class too.
  const upstream = loadUpstreamErrors()

  return afterUpstream(upstream, {
    async get(id) {
      checkTextId(id, 'checkpoint id', invalidId)
      return value<SandboxCheckpoint | null>(db, `SELECT ${SP}.checkpoint_get($1::text) AS r`, [id])
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
      const source = input as unknown
      let payload: unknown = source
      let conversation: unknown = undefined
      if (isPlainObject(source)) {
        const parts = checkpointParts(source.checkpoint)
        conversation = parts.conversation
        // expectedHeadId is copied as given: undefined (absent) is INVALID_ID, null is "no head".
        payload = { checkpoint: parts.header, expectedHeadId: source.expectedHeadId, writer: writerJson(source.writer) }
      }
      return value<{ headId: string }>(db, `SELECT ${SP}.checkpoint_append($1::json, $2::json, $3::bigint) AS r`, [
        json(payload),
        json(conversation),
        clockValue(now),
      ])
    },

    async deleteHead(input) {
      const source = input as unknown
      const payload = isPlainObject(source)
        ? { threadId: source.threadId, checkpointId: source.checkpointId, writer: writerJson(source.writer) }
        : source
      await run(db, `SELECT ${SP}.checkpoint_delete_head($1::json, $2::bigint)`, [json(payload), clockValue(now)])
    },

    async acquireWriter(threadId) {
      checkTextId(threadId, 'threadId', invalidId)
      const acquired = await value<SandboxCheckpointWriter & { expiresAt: number }>(
        db,
        `SELECT ${SP}.checkpoint_acquire_writer($1::text, $2::bigint, $3::bigint) AS r`,
        [threadId, leaseDurationMs, clockValue(now)],
      )
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
      const source = input as unknown
      const payload = isPlainObject(source)
        ? {
            sourceThreadId: source.sourceThreadId,
            sourceCheckpointId: source.sourceCheckpointId,
            destinationThreadId: source.destinationThreadId,
            destinationCheckpointId: source.destinationCheckpointId,
            createdAt: source.createdAt,
            writer: writerJson(source.writer),
          }
        : source
      return value<{ checkpoint: SandboxCheckpoint }>(
        db,
        `SELECT ${SP}.checkpoint_fork_from_checkpoint($1::json, $2::bigint) AS r`,
        [json(payload), clockValue(now)],
      )
    },
  })
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
