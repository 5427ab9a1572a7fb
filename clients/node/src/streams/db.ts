/**
 * The stream functions of the extension (docs/contract/streams.md §4), one
 * statement each. Results are the contract's camelCase JSON; bodies are bytea
 * (Buffers). Errors are node-postgres errors carrying the SQLSTATE in `code`.
 */
import { SP, type Queryable } from '../internal.js'

export interface StreamMeta {
  streamId: string | number
  contentType: string
  nextOffset: string
  closed: boolean
  ttlSeconds?: number
  expiresAt?: number
}

export interface CreateResult extends StreamMeta {
  created: boolean
}

export interface AppendResult {
  outcome: 'appended' | 'duplicate' | 'closed'
  streamId: string | number
  nextOffset: string
  closed: boolean
  producerEpoch?: number
  producerSeq?: number
}

export interface ReadMeta extends StreamMeta {
  startOffset: string
  upToDate: boolean
}

export interface HeadResult extends StreamMeta {
  /** The stream-wide producer epoch fence, once an append with streamFence set it. */
  producerFence?: number
  producer?: { epoch: number; lastSeq: number }
}

export interface CreateOptions {
  ttlSeconds?: number
  expiresAt?: number
  closed?: boolean
  forkedFrom?: string
  forkOffset?: string
  forkSubOffset?: number
}

export interface AppendOptions {
  close?: boolean
  producerId?: string
  producerEpoch?: number
  producerSeq?: number
  streamSeq?: string
  /** Raise the stream-wide fence to producerEpoch (streamFencePrefixes). */
  streamFence?: boolean
}

async function one<T>(db: Queryable, text: string, values: unknown[]): Promise<T> {
  const result = await db.query(text, values)
  return (result.rows[0] as { r: T }).r
}

const json = (options: object): string | null => (Object.keys(options).length === 0 ? null : JSON.stringify(options))

export function streamCreate(
  db: Queryable, path: string, contentType: string | null, options: CreateOptions, body: Buffer | null,
): Promise<CreateResult> {
  return one(db, `SELECT ${SP}.stream_create($1::text, $2::text, $3::json, $4::bytea) AS r`, [path, contentType, json(options), body])
}

export function streamAppend(
  db: Queryable, path: string, contentType: string | null, body: Buffer, options: AppendOptions,
): Promise<AppendResult> {
  return one(db, `SELECT ${SP}.stream_append($1::text, $2::text, $3::bytea, $4::json) AS r`, [path, contentType, body, json(options)])
}

export async function streamRead(db: Queryable, path: string, offset: string, maxBytes: number): Promise<{ meta: ReadMeta; body: Buffer }> {
  const result = await db.query(`SELECT meta, body FROM ${SP}.stream_read($1::text, $2::text, $3::integer)`, [path, offset, maxBytes])
  const row = result.rows[0] as { meta: ReadMeta; body: Buffer | null }
  return { meta: row.meta, body: row.body ?? Buffer.alloc(0) }
}

export function streamHead(db: Queryable, path: string, producerId: string | null = null): Promise<HeadResult> {
  return one(db, `SELECT ${SP}.stream_head($1::text, $2::text) AS r`, [path, producerId])
}

export function streamDelete(db: Queryable, path: string): Promise<{ softDeleted: boolean }> {
  return one(db, `SELECT ${SP}.stream_delete($1::text) AS r`, [path])
}

