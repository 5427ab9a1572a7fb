/**
 * The blob store (persistence-stores.md section 7; sql-api.md rules 11, 12).
 *
 * Bodies are turned into exact bytes here; small bodies of known length go
 * through one `blob_put`, everything else (length-less streams, large bodies)
 * through the streamed upload protocol. Reads copy the driver's Buffer
 * exactly, and objects beyond the server's single-call limit
 * (`sandbox_persist.blob_max_read`) are read with successive ranged calls.
 */
import { checkInteger, checkNumberOption, checkOptionalText, checkTextId, isPlainObject, json, run, value, type Queryable } from './internal.js'
import type {
  BlobBody,
  BlobListPage,
  BlobObject,
  BlobPutOptions,
  BlobRecord,
  BlobStore,
} from './types.js'

const SP = 'sandbox_persist'
const MiB = 1024 * 1024

export interface PostgresBlobStoreOptions {
  /** Bodies of known length up to this size use one `blob_put` (default 8 MiB). */
  singleCallThreshold?: number
  /** Bytes per `blob_upload_append` call (default 1 MiB). */
  uploadPieceBytes?: number
  /** Upper bound for one ranged read when an object exceeds `blob_max_read` (default 64 MiB). */
  readPieceBytes?: number
}

/** PostgreSQL memory-unit text ('8kB', '512MB', '8192') in bytes. */
function parseMemory(text: string | null): number | undefined {
  if (text === null) return undefined
  const match = /^\s*(\d+)\s*(B|kB|MB|GB|TB)?\s*$/.exec(text)
  if (match === null) return undefined
  const scale: Record<string, number> = { B: 1, kB: 1024, MB: MiB, GB: 1024 * MiB, TB: 1024 * 1024 * MiB }
  const n = Number(match[1]) * (scale[match[2] ?? 'B'] ?? 1)
  return Number.isSafeInteger(n) && n > 0 ? n : undefined
}

function positiveInteger(input: number | undefined, fallback: number, what: string): number {
  if (input === undefined) return fallback
  return checkNumberOption(input, what, (n) => Number.isSafeInteger(n) && n > 0, `${what} must be a positive integer.`)
}

/** Exact copy of a byte window: never hand out a view into a shared slab. */
function copyBytes(view: ArrayBufferView): Uint8Array {
  const out = new Uint8Array(view.byteLength)
  out.set(new Uint8Array(view.buffer, view.byteOffset, view.byteLength))
  return out
}

function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
}

function chunkBytes(chunk: unknown): Uint8Array {
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk.slice(0))
  if (ArrayBuffer.isView(chunk)) return copyBytes(chunk)
  throw new TypeError('Blob body stream chunks must be Uint8Array (or another ArrayBuffer view).')
}

function concat(parts: ReadonlyArray<Uint8Array>, total: number): Uint8Array {
  if (parts.length === 1 && parts[0]!.byteLength === total) return parts[0]!
  const out = new Uint8Array(total)
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.byteLength
  }
  return out
}

function bytesStream(bytes: Uint8Array): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    start(controller) {
      if (bytes.byteLength > 0) controller.enqueue(bytes.slice())
      controller.close()
    },
  })
}

interface BlobRow {
  r: (BlobRecord & { range?: { offset: number; length: number } }) | null
  b: Buffer | null
}

export function postgresBlobStore(db: Queryable, options: PostgresBlobStoreOptions = {}): BlobStore {
  const threshold = positiveInteger(options.singleCallThreshold, 8 * MiB, 'singleCallThreshold')
  const pieceBytes = positiveInteger(options.uploadPieceBytes, MiB, 'uploadPieceBytes')
  const readPieceBytes = positiveInteger(options.readPieceBytes, 64 * MiB, 'readPieceBytes')
  let serverMaxRead: number | undefined

  async function maxRead(): Promise<number> {
    if (serverMaxRead === undefined) {
      // current_setting also answers while the setting is only a placeholder
      // (library not loaded yet in this session), which pg_settings does not.
      const setting = await value<string | null>(
        db,
        `SELECT pg_catalog.current_setting('sandbox_persist.blob_max_read', true) AS r`,
        [],
      )
      serverMaxRead = parseMemory(setting) ?? 512 * MiB
    }
    return Math.min(serverMaxRead, readPieceBytes)
  }

  function putOptions(body: BlobBody, given: BlobPutOptions | undefined): string | null {
    if (given !== undefined && !isPlainObject(given)) return json(given)
    const out: Record<string, unknown> = {}
    if (given !== undefined) {
      for (const key of Object.keys(given)) {
        // expectedLength is advisory: it only chooses the strategy, never sent.
        if (key === 'expectedLength') continue
        out[key] = (given as Record<string, unknown>)[key]
      }
    }
    if (out.contentType === undefined && typeof Blob !== 'undefined' && body instanceof Blob && body.type !== '') {
      out.contentType = body.type
    }
    return JSON.stringify(out)
  }

  async function putBytes(key: string, bytes: Uint8Array, opts: string | null): Promise<BlobRecord> {
    return value<BlobRecord>(db, `SELECT ${SP}.blob_put($1::text, $2::bytea, $3::json) AS r`, [
      key,
      toBuffer(bytes),
      opts,
    ])
  }

  /** The streamed upload protocol: begin, append pieces at their offsets, commit; abort on any error. */
  async function upload(key: string, pieces: AsyncGenerator<Uint8Array>, opts: string | null): Promise<BlobRecord> {
    let uploadId: string
    try {
      uploadId = await value<string>(db, `SELECT ${SP}.blob_upload_begin($1::text, $2::json) AS r`, [key, opts])
    } catch (error) {
      await pieces.return(undefined).catch(() => undefined)
      throw error
    }
    let offset = 0
    try {
      for await (const piece of pieces) {
        if (piece.byteLength === 0) continue
        // A retried piece (40001/40P01, inside run()) is resent at the same offset.
        await run(db, `SELECT ${SP}.blob_upload_append($1::text, $2::bigint, $3::bytea)`, [
          uploadId,
          offset,
          toBuffer(piece),
        ])
        offset += piece.byteLength
      }
      return await value<BlobRecord>(db, `SELECT ${SP}.blob_upload_commit($1::text) AS r`, [uploadId])
    } catch (error) {
      await run(db, `SELECT ${SP}.blob_upload_abort($1::text)`, [uploadId]).catch(() => undefined)
      throw error
    }
  }

  async function* slices(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
    for (let at = 0; at < bytes.byteLength; at += pieceBytes) {
      yield bytes.subarray(at, Math.min(at + pieceBytes, bytes.byteLength))
    }
  }

  /** Pieces of `pieceBytes` (the last one shorter) from a stream after `prefix`; cancels it on early exit. */
  async function* streamPieces(
    reader: ReadableStreamDefaultReader<unknown>,
    prefix: ReadonlyArray<Uint8Array>,
  ): AsyncGenerator<Uint8Array> {
    let pending: Array<Uint8Array> = [...prefix]
    let size = pending.reduce((n, p) => n + p.byteLength, 0)
    let finished = false
    try {
      for (;;) {
        if (size >= pieceBytes) {
          const all = concat(pending, size)
          let at = 0
          while (all.byteLength - at >= pieceBytes) {
            yield all.subarray(at, at + pieceBytes)
            at += pieceBytes
          }
          pending = at < all.byteLength ? [all.subarray(at)] : []
          size = all.byteLength - at
        }
        const next = await reader.read()
        if (next.done) {
          finished = true
          if (size > 0) yield concat(pending, size)
          return
        }
        const bytes = chunkBytes(next.value)
        pending.push(bytes)
        size += bytes.byteLength
      }
    } finally {
      if (!finished) await reader.cancel().catch(() => undefined)
      reader.releaseLock()
    }
  }

  async function putStream(
    key: string,
    stream: ReadableStream<unknown>,
    opts: string | null,
    expectedLength: number | undefined,
  ): Promise<BlobRecord> {
    const reader = stream.getReader()
    if (expectedLength !== undefined && expectedLength <= threshold) {
      // A declared small length: buffer and use one call, unless the stream
      // turns out larger than the threshold (then stream what we have).
      const parts: Array<Uint8Array> = []
      let size = 0
      try {
        for (;;) {
          const next = await reader.read()
          if (next.done) {
            reader.releaseLock()
            return putBytes(key, concat(parts, size), opts)
          }
          const bytes = chunkBytes(next.value)
          parts.push(bytes)
          size += bytes.byteLength
          if (size > threshold) break
        }
      } catch (error) {
        await reader.cancel(error).catch(() => undefined)
        reader.releaseLock()
        throw error
      }
      return uploadFromReader(key, reader, parts, opts)
    }
    return uploadFromReader(key, reader, [], opts)
  }

  async function uploadFromReader(
    key: string,
    reader: ReadableStreamDefaultReader<unknown>,
    prefix: ReadonlyArray<Uint8Array>,
    opts: string | null,
  ): Promise<BlobRecord> {
    try {
      return await upload(key, streamPieces(reader, prefix), opts)
    } catch (error) {
      // If the pieces generator never started (begin failed), the stream is still ours.
      try {
        await reader.cancel(error).catch(() => undefined)
        reader.releaseLock()
      } catch {
        // already released by the generator
      }
      throw error
    }
  }

  async function readOnce(key: string, offset: number | null, length: number | null): Promise<BlobRow | null> {
    const result = await run(
      db,
      `SELECT record AS r, body AS b FROM ${SP}.blob_get($1::text, $2::bigint, $3::bigint)`,
      [key, offset, length],
      { detailIsMessage: ['22003'] },
    )
    return (result.rows[0] as BlobRow | undefined) ?? null
  }

  /** A read beyond `blob_max_read`: successive ranged reads of one version (same etag). */
  async function readPieces(
    key: string,
    start: number,
    length: number | undefined,
  ): Promise<{ record: BlobRecord; bytes: Uint8Array } | null> {
    let piece = await maxRead()
    const readPiece = async (at: number, want: number): Promise<BlobRow | null> => {
      for (;;) {
        try {
          return await readOnce(key, at, Math.min(piece, want))
        } catch (error) {
          // The limit is smaller than we believed: halve and retry.
          if ((error as { sqlstate?: string }).sqlstate !== '54000' || piece <= 4096) throw error
          piece = Math.floor(piece / 2)
          serverMaxRead = piece
        }
      }
    }
    for (let attempt = 0; attempt < 5; attempt++) {
      const first = await readPiece(start, length ?? Number.MAX_SAFE_INTEGER)
      if (first === null || first.r === null) return null
      const record = first.r
      const size = record.size ?? 0
      const end = length === undefined ? size : Math.min(size, start + length)
      const parts: Array<Uint8Array> = [copyBytes(first.b ?? Buffer.alloc(0))]
      let at = start + parts[0]!.byteLength
      let consistent = true
      while (at < end) {
        const next = await readPiece(at, end - at)
        if (next === null || next.r === null || next.r.etag !== record.etag) {
          consistent = false
          break
        }
        const bytes = copyBytes(next.b ?? Buffer.alloc(0))
        if (bytes.byteLength === 0) break
        parts.push(bytes)
        at += bytes.byteLength
      }
      if (consistent) return { record, bytes: concat(parts, at - start) }
    }
    throw new Error(`Blob ${JSON.stringify(key)} kept changing while it was read in pieces.`)
  }

  function toObject(record: BlobRecord & { range?: { offset: number; length: number } }, bytes: Uint8Array): BlobObject {
    return {
      ...record,
      arrayBuffer: async () => bytes.slice().buffer,
      text: async () => new TextDecoder().decode(bytes),
      body: bytesStream(bytes),
    }
  }

  return {
    async put(key, body, options) {
      checkTextId(key, 'key')
      const opts = putOptions(body, options)
      const expectedLength =
        isPlainObject(options) && typeof options.expectedLength === 'number' ? options.expectedLength : undefined
      if (typeof body === 'string') {
        const bytes = new TextEncoder().encode(body)
        return bytes.byteLength <= threshold ? putBytes(key, bytes, opts) : upload(key, slices(bytes), opts)
      }
      if (body instanceof ArrayBuffer) {
        const bytes = new Uint8Array(body.slice(0))
        return bytes.byteLength <= threshold ? putBytes(key, bytes, opts) : upload(key, slices(bytes), opts)
      }
      if (ArrayBuffer.isView(body)) {
        const bytes = copyBytes(body)
        return bytes.byteLength <= threshold ? putBytes(key, bytes, opts) : upload(key, slices(bytes), opts)
      }
      if (typeof Blob !== 'undefined' && body instanceof Blob) {
        if (body.size <= threshold) return putBytes(key, new Uint8Array(await body.arrayBuffer()), opts)
        return putStream(key, body.stream(), opts, undefined)
      }
      if (typeof ReadableStream !== 'undefined' && body instanceof ReadableStream) {
        return putStream(key, body, opts, expectedLength)
      }
      throw new TypeError('Unsupported blob body: expected a ReadableStream, ArrayBuffer, ArrayBufferView, string or Blob.')
    },

    async get(key, options) {
      checkTextId(key, 'key')
      const range = options?.range
      let offset: number | null = null
      let length: number | null = null
      if (range !== undefined) {
        const o = range.offset
        if (typeof o !== 'number' || !Number.isSafeInteger(o)) {
          // Caught before the call [R10]; the size is unknown without one.
          throw new RangeError(`Blob range offset ${String(o)} is outside the object (size unknown).`)
        }
        if (range.length !== undefined && (typeof range.length !== 'number' || !Number.isSafeInteger(range.length))) {
          throw new RangeError(`Blob range length ${String(range.length)} is not valid.`)
        }
        offset = o
        length = range.length ?? null
      }
      let row: BlobRow | null
      try {
        row = await readOnce(key, offset, length)
      } catch (error) {
        if (!(error instanceof RangeError) || (error as { sqlstate?: string }).sqlstate !== '54000') throw error
        // Larger than one call may return [B20]: read it in pieces.
        const pieces = await readPieces(key, offset ?? 0, length ?? undefined)
        if (pieces === null) return null
        const { range: _ignored, ...record } = pieces.record as BlobRecord & { range?: unknown }
        const withRange =
          range === undefined ? record : { ...record, range: { offset: offset ?? 0, length: pieces.bytes.byteLength } }
        return toObject(withRange, pieces.bytes)
      }
      if (row === null || row.r === null) return null
      return toObject(row.r, copyBytes(row.b ?? Buffer.alloc(0)))
    },

    async head(key) {
      checkTextId(key, 'key')
      return value<BlobRecord | null>(db, `SELECT ${SP}.blob_head($1::text) AS r`, [key])
    },

    async delete(key) {
      checkTextId(key, 'key')
      await run(db, `SELECT ${SP}.blob_delete($1::text)`, [key])
    },

    async list(options) {
      const prefix = checkOptionalText(options?.prefix, 'prefix')
      const cursor = checkOptionalText(options?.cursor, 'cursor')
      let limit: number | null = null
      if (options?.limit !== undefined) {
        limit = checkInteger(options.limit, 'limit', (message) => new RangeError(message))
      }
      const page = await value<BlobListPage>(
        db,
        `SELECT ${SP}.blob_list($1::text, $2::text, $3::integer) AS r`,
        [prefix, cursor, limit],
        { rangeErrors: ['22023', '22003'] },
      )
      return page
    },
  }
}
