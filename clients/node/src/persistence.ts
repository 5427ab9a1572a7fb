/**
 * The seven persistence stores over sandbox_persist
 * (docs/contract/messages.md, runs.md, chat-stores.md, blobs.md). Each method
 * is one statement: `SELECT sandbox_persist.<store>_<method>(...)`.
 */
import type { MetadataStore, ModelMessage, RunRecord } from '@tanstack/ai'
import { postgresBlobStore, type PostgresBlobStoreOptions } from './blobs.js'
import {
  checkInteger,
  checkTextId,
  encodePatch,
  json,
  run,
  SP,
  value,
  type Queryable,
} from './internal.js'
import type {
  AIPersistence,
  ArtifactRecord,
  ArtifactStore,
  GenerationRunRecord,
  GenerationRunStore,
  InterruptRecord,
  MessageStore,
  PostgresInterruptStore,
  PostgresPersistenceStores,
  PostgresRunStore,
} from './types.js'

export function postgresMessageStore(db: Queryable): MessageStore {
  return {
    async loadThread(threadId) {
      checkTextId(threadId, 'threadId')
      const messages = await value<Array<ModelMessage> | null>(
        db,
        `SELECT ${SP}.message_load_thread($1::text) AS r`,
        [threadId],
      )
      return messages ?? []
    },
    async saveThread(threadId, messages) {
      checkTextId(threadId, 'threadId')
      await run(db, `SELECT ${SP}.message_save_thread($1::text, $2::json)`, [threadId, json(messages)])
    },
  }
}

export function postgresRunStore(db: Queryable): PostgresRunStore {
  return {
    async createOrResume(input) {
      return value<RunRecord>(db, `SELECT ${SP}.run_create_or_resume($1::json) AS r`, [json(input)])
    },
    async update(runId, patch) {
      checkTextId(runId, 'runId')
      const encoded = encodePatch(patch, { dropKeys: ['status'] })
      await run(db, `SELECT ${SP}.run_update($1::text, $2::json)`, [runId, encoded.patch])
    },
    async get(runId) {
      checkTextId(runId, 'runId')
      return value<RunRecord | null>(db, `SELECT ${SP}.run_get($1::text) AS r`, [runId])
    },
    async findActiveRun(threadId) {
      checkTextId(threadId, 'threadId')
      return value<RunRecord | null>(db, `SELECT ${SP}.run_find_active_run($1::text) AS r`, [threadId])
    },
    async listByThread(threadId) {
      checkTextId(threadId, 'threadId')
      return (await value<Array<RunRecord> | null>(db, `SELECT ${SP}.run_list_by_thread($1::text) AS r`, [threadId])) ?? []
    },
    async listReclaimable(opts) {
      const now = checkInteger(opts?.now, 'now')
      const ttlMs = checkInteger(opts?.ttlMs, 'ttlMs')
      return (
        (await value<Array<RunRecord> | null>(
          db,
          `SELECT ${SP}.run_list_reclaimable($1::bigint, $2::bigint) AS r`,
          [now, ttlMs],
        )) ?? []
      )
    },
  }
}

export function postgresInterruptStore(db: Queryable): PostgresInterruptStore {
  const list = (fn: string, what: string) => async (id: string) => {
    checkTextId(id, what)
    return (await value<Array<InterruptRecord> | null>(db, `SELECT ${SP}.${fn}($1::text) AS r`, [id])) ?? []
  }
  return {
    async create(record) {
      // Not a structural record (rule 4): JSON.stringify drops an own
      // `response: undefined`, which must read back absent; null is a value.
      await run(db, `SELECT ${SP}.interrupt_create($1::json)`, [json(record)])
    },
    async resolve(interruptId, response?: unknown) {
      checkTextId(interruptId, 'interruptId')
      // SQL NULL = no response (clears); the JSON text null stores null.
      await run(db, `SELECT ${SP}.interrupt_resolve($1::text, $2::json)`, [interruptId, json(response)])
    },
    async cancel(interruptId) {
      checkTextId(interruptId, 'interruptId')
      await run(db, `SELECT ${SP}.interrupt_cancel($1::text)`, [interruptId])
    },
    async commitBatch(entries) {
      await run(db, `SELECT ${SP}.interrupt_commit_batch($1::json)`, [json(entries)])
    },
    async get(interruptId) {
      checkTextId(interruptId, 'interruptId')
      return value<InterruptRecord | null>(db, `SELECT ${SP}.interrupt_get($1::text) AS r`, [interruptId])
    },
    list: list('interrupt_list', 'threadId'),
    listPending: list('interrupt_list_pending', 'threadId'),
    listByRun: list('interrupt_list_by_run', 'runId'),
    listPendingByRun: list('interrupt_list_pending_by_run', 'runId'),
  }
}

export function postgresMetadataStore(db: Queryable): MetadataStore {
  return {
    async get(namespace, key) {
      checkTextId(namespace, 'namespace')
      checkTextId(key, 'key')
      return value<unknown>(db, `SELECT ${SP}.metadata_get($1::text, $2::text) AS r`, [namespace, key])
    },
    async set(namespace, key, v) {
      checkTextId(namespace, 'namespace')
      checkTextId(key, 'key')
      // undefined -> SQL NULL and null -> JSON null: both 22004 -> TypeError.
      await run(db, `SELECT ${SP}.metadata_set($1::text, $2::text, $3::json)`, [namespace, key, json(v)], {
        detailIsMessage: ['22004'],
      })
    },
    async delete(namespace, key) {
      checkTextId(namespace, 'namespace')
      checkTextId(key, 'key')
      await run(db, `SELECT ${SP}.metadata_delete($1::text, $2::text)`, [namespace, key])
    },
  }
}

export function postgresGenerationRunStore(db: Queryable): GenerationRunStore {
  return {
    async createOrResume(input) {
      return value<GenerationRunRecord>(db, `SELECT ${SP}.generation_run_create_or_resume($1::json) AS r`, [
        json(input),
      ])
    },
    async update(runId, patch) {
      checkTextId(runId, 'runId')
      // `result: null` is a stored value; an explicit undefined clears it
      // through the `clear` list instead.
      const encoded = encodePatch(patch, { dropKeys: ['status'], clearKeys: ['result'] })
      await run(db, `SELECT ${SP}.generation_run_update($1::text, $2::json, $3::json)`, [
        runId,
        encoded.patch,
        encoded.clear.length > 0 ? JSON.stringify(encoded.clear) : null,
      ])
    },
    async get(runId) {
      checkTextId(runId, 'runId')
      return value<GenerationRunRecord | null>(db, `SELECT ${SP}.generation_run_get($1::text) AS r`, [runId])
    },
    async findLatestForThread(threadId) {
      checkTextId(threadId, 'threadId')
      return value<GenerationRunRecord | null>(
        db,
        `SELECT ${SP}.generation_run_find_latest_for_thread($1::text) AS r`,
        [threadId],
      )
    },
  }
}

export function postgresArtifactStore(db: Queryable): ArtifactStore {
  return {
    async save(record) {
      // Full replace: JSON.stringify drops an undefined blobKey/sourceUrl,
      // which is exactly "absent" (rule 4 does not apply here).
      await run(db, `SELECT ${SP}.artifact_save($1::json)`, [json(record)])
    },
    async get(artifactId) {
      checkTextId(artifactId, 'artifactId')
      return value<ArtifactRecord | null>(db, `SELECT ${SP}.artifact_get($1::text) AS r`, [artifactId])
    },
    async list(runId) {
      checkTextId(runId, 'runId')
      return (await value<Array<ArtifactRecord> | null>(db, `SELECT ${SP}.artifact_list($1::text) AS r`, [runId])) ?? []
    },
    async listForThread(threadId) {
      checkTextId(threadId, 'threadId')
      return (
        (await value<Array<ArtifactRecord> | null>(db, `SELECT ${SP}.artifact_list_for_thread($1::text) AS r`, [
          threadId,
        ])) ?? []
      )
    },
    async delete(artifactId) {
      checkTextId(artifactId, 'artifactId')
      await run(db, `SELECT ${SP}.artifact_delete($1::text)`, [artifactId])
    },
    async deleteForRun(runId) {
      checkTextId(runId, 'runId')
      await run(db, `SELECT ${SP}.artifact_delete_for_run($1::text)`, [runId])
    },
  }
}

export interface PostgresPersistenceOptions {
  blobs?: PostgresBlobStoreOptions
}

/**
 * All seven persistence stores over one pool, shaped as an `AIPersistence`
 * object for `withPersistence(...)` and `withSandbox({ snapshots: { persistence } })`.
 */
export function postgresPersistence(
  pool: Queryable,
  options: PostgresPersistenceOptions = {},
): AIPersistence<PostgresPersistenceStores> {
  return {
    stores: {
      messages: postgresMessageStore(pool),
      runs: postgresRunStore(pool),
      interrupts: postgresInterruptStore(pool),
      metadata: postgresMetadataStore(pool),
      generationRuns: postgresGenerationRunStore(pool),
      artifacts: postgresArtifactStore(pool),
      blobs: postgresBlobStore(pool, options.blobs),
    },
  }
}
