/**
 * The blob store (docs/contract/blobs.md; docs/contract/README.md §6, rules
 * 11 and 12).
 *
 * Bodies are turned into exact bytes here; small bodies of known length go
 * through one `blob_put`, everything else (length-less streams, large bodies)
 * through the streamed upload protocol.
 *
 * Reads stream: `get` makes one ranged `blob_get` call for the first piece
 * (the record, or null), and the body reads the rest piece by piece as the
 * consumer pulls (two pieces ahead at most; cancel or the signal stops it).
 * Every piece must carry the first piece's etag: an object overwritten or
 * deleted mid-read fails the read with BLOB_VERSION_CHANGED rather than mixing
 * versions. Both put and get accept an AbortSignal.
 */
import { SandboxPersistError } from './errors.js'
import {
  canCopyOut,
  checkInteger,
  checkNumberOption,
  checkOptionalText,
  checkTextId,
  isPlainObject,
  json,
  run,
  runCopyOut,
  SP,
  value,
  type Queryable,
} from './internal.js'
import type {
  BlobBody,
  BlobListPage,
  BlobObject,
  BlobPutOptions,
  BlobRecord,
  BlobStore,
} from './types.js'

const MiB = 1024 * 1024
/** Ranged reads of one streamed get in flight at once, beyond the piece the consumer holds. */
const READ_AHEAD = 2

export interface PostgresBlobStoreOptions {
  /** Bodies of known length up to this size use one `blob_put` (default 8 MiB). */
  singleCallThreshold?: number
  /** Bytes per `blob_upload_append` call (default 1 MiB). */
  uploadPieceBytes?: number
  /**
   * Bytes per ranged read (default 1 MiB, capped by the server's
   * `blob_max_read`). `get` reads the first piece at once and the rest as the
   * body is consumed, at most two pieces ahead of the consumer.
   */
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

/** Bytes that own their whole ArrayBuffer: the driver's Buffer when it does, else a copy (never a slab view). */
function ownBytes(buffer: Buffer): Uint8Array {
  if (buffer.byteOffset === 0 && buffer.buffer.byteLength === buffer.byteLength) {
    return new Uint8Array(buffer.buffer, 0, buffer.byteLength)
  }
  return copyBytes(buffer)
}

function checkSignal(signal: unknown): AbortSignal | undefined {
  if (signal === undefined) return undefined
  if (typeof AbortSignal !== 'undefined' && signal instanceof AbortSignal) return signal
  throw new TypeError('signal must be an AbortSignal.')
}

/** A bigint argument written into a statement: a safe integer (checked by the caller) or NULL. */
function sqlBigint(n: number | null): string {
  if (n === null) return 'NULL'
  if (!Number.isSafeInteger(n)) throw new RangeError(`${n} is not a safe integer.`)
  return `${n}::bigint`
}

interface BlobRow {
  r: (BlobRecord & { range?: { offset: number; length: number } }) | null
  b: Buffer | null
}

type RangedRecord = BlobRecord & { range?: { offset: number; length: number } }

/** One blob body of any accepted kind as bytes, or null for a stream or a large Blob. */
function knownBytes(body: BlobBody): Uint8Array | null {
  if (typeof body === 'string') return new TextEncoder().encode(body)
  if (body instanceof ArrayBuffer) return new Uint8Array(body.slice(0))
  if (ArrayBuffer.isView(body)) return copyBytes(body)
  return null
}

/** The options JSON sent with a put: the caller's options minus the advisory ones, plus a Blob's type. */
function putOptions(body: BlobBody, given: BlobPutOptions | undefined): string | null {
  if (given !== undefined && !isPlainObject(given)) return json(given)
  const out: Record<string, unknown> = {}
  if (given !== undefined) {
    for (const key of Object.keys(given)) {
      // expectedLength is advisory: it only chooses the strategy; the signal is ours. Neither is sent.
      if (key === 'expectedLength' || key === 'signal') continue
      out[key] = (given as Record<string, unknown>)[key]
    }
  }
  if (out.contentType === undefined && typeof Blob !== 'undefined' && body instanceof Blob && body.type !== '') {
    out.contentType = body.type
  }
  return JSON.stringify(out)
}

/**
 * The write side (blob_put, blob_upload_begin / _append / _commit / _abort):
 * bodies of known length up to the threshold in one call, the rest through
 * the streamed upload protocol.
 */
class BlobWriter {
  constructor(
    private readonly db: Queryable,
    private readonly threshold: number,
    private readonly pieceBytes: number,
  ) {}

  async put(key: string, body: BlobBody, options: BlobPutOptions | undefined): Promise<BlobRecord> {
    checkTextId(key, 'key')
    const signal = checkSignal(isPlainObject(options) ? options.signal : undefined)
    const opts = putOptions(body, options)
    const expectedLength =
      isPlainObject(options) && typeof options.expectedLength === 'number' ? options.expectedLength : undefined
    const bytes = knownBytes(body)
    if (bytes !== null) {
      return bytes.byteLength <= this.threshold
        ? this.putBytes(key, bytes, opts, signal)
        : this.upload(key, this.slices(bytes), opts, signal)
    }
    if (typeof Blob !== 'undefined' && body instanceof Blob) {
      if (body.size <= this.threshold) return this.putBytes(key, new Uint8Array(await body.arrayBuffer()), opts, signal)
      return this.putStream(key, body.stream(), opts, undefined, signal)
    }
    if (typeof ReadableStream !== 'undefined' && body instanceof ReadableStream) {
      return this.putStream(key, body, opts, expectedLength, signal)
    }
    throw new TypeError('Unsupported blob body: expected a ReadableStream, ArrayBuffer, ArrayBufferView, string or Blob.')
  }

  private async putBytes(
    key: string,
    bytes: Uint8Array,
    opts: string | null,
    signal: AbortSignal | undefined,
  ): Promise<BlobRecord> {
    signal?.throwIfAborted()
    return value<BlobRecord>(this.db, `SELECT ${SP}.blob_put($1::text, $2::bytea, $3::json) AS r`, [
      key,
      toBuffer(bytes),
      opts,
    ])
  }

  /** The streamed upload protocol: begin, append pieces at their offsets, commit; abort on any error. */
  private async upload(
    key: string,
    pieces: AsyncGenerator<Uint8Array>,
    opts: string | null,
    signal: AbortSignal | undefined,
  ): Promise<BlobRecord> {
    const db = this.db
    let uploadId: string
    try {
      signal?.throwIfAborted()
      uploadId = await value<string>(db, `SELECT ${SP}.blob_upload_begin($1::text, $2::json) AS r`, [key, opts])
    } catch (error) {
      await pieces.return(undefined).catch(() => undefined)
      throw error
    }
    let offset = 0
    try {
      for await (const piece of pieces) {
        signal?.throwIfAborted()
        if (piece.byteLength === 0) continue
        // A retried piece (40001/40P01, inside run()) is resent at the same offset.
        await run(db, `SELECT ${SP}.blob_upload_append($1::text, $2::bigint, $3::bytea)`, [
          uploadId,
          offset,
          toBuffer(piece),
        ])
        offset += piece.byteLength
      }
      // An abort may have ended the source stream early: never commit a truncated object.
      signal?.throwIfAborted()
      return await value<BlobRecord>(db, `SELECT ${SP}.blob_upload_commit($1::text) AS r`, [uploadId])
    } catch (error) {
      await run(db, `SELECT ${SP}.blob_upload_abort($1::text)`, [uploadId]).catch(() => undefined)
      throw error
    }
  }

  private async *slices(bytes: Uint8Array): AsyncGenerator<Uint8Array> {
    const pieceBytes = this.pieceBytes
    for (let at = 0; at < bytes.byteLength; at += pieceBytes) {
      yield bytes.subarray(at, Math.min(at + pieceBytes, bytes.byteLength))
    }
  }

  /** Pieces of `pieceBytes` (the last one shorter) from a stream after `prefix`; cancels it on early exit. */
  private async *streamPieces(
    reader: ReadableStreamDefaultReader<unknown>,
    prefix: ReadonlyArray<Uint8Array>,
  ): AsyncGenerator<Uint8Array> {
    const pieceBytes = this.pieceBytes
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

  private async putStream(
    key: string,
    stream: ReadableStream<unknown>,
    opts: string | null,
    expectedLength: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<BlobRecord> {
    signal?.throwIfAborted()
    const reader = stream.getReader()
    // An abort also ends a source read that would otherwise wait forever; the
    // upload then sees the signal and aborts instead of committing.
    const onAbort = () => void reader.cancel(signal?.reason).catch(() => undefined)
    signal?.addEventListener('abort', onAbort, { once: true })
    try {
      return await this.putStreamWith(key, reader, opts, expectedLength, signal)
    } finally {
      signal?.removeEventListener('abort', onAbort)
    }
  }

  private async putStreamWith(
    key: string,
    reader: ReadableStreamDefaultReader<unknown>,
    opts: string | null,
    expectedLength: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<BlobRecord> {
    if (expectedLength !== undefined && expectedLength <= this.threshold) {
      // A declared small length: buffer and use one call, unless the stream
      // turns out larger than the threshold (then stream what we have).
      const parts: Array<Uint8Array> = []
      let size = 0
      try {
        for (;;) {
          const next = await reader.read()
          if (next.done) {
            reader.releaseLock()
            return this.putBytes(key, concat(parts, size), opts, signal)
          }
          const bytes = chunkBytes(next.value)
          parts.push(bytes)
          size += bytes.byteLength
          if (size > this.threshold) break
        }
      } catch (error) {
        await reader.cancel(error).catch(() => undefined)
        reader.releaseLock()
        throw error
      }
      return this.uploadFromReader(key, reader, parts, opts, signal)
    }
    return this.uploadFromReader(key, reader, [], opts, signal)
  }

  private async uploadFromReader(
    key: string,
    reader: ReadableStreamDefaultReader<unknown>,
    prefix: ReadonlyArray<Uint8Array>,
    opts: string | null,
    signal: AbortSignal | undefined,
  ): Promise<BlobRecord> {
    try {
      return await this.upload(key, this.streamPieces(reader, prefix), opts, signal)
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
}

/** The read side (blob_get): ranged reads sized to the server's blob_max_read. */
class BlobReader {
  private serverMaxRead: number | undefined
  private readonly binary: boolean

  constructor(
    private readonly db: Queryable,
    private readonly readPieceBytes: number,
  ) {
    this.binary = canCopyOut(db)
  }

  async get(key: string, options: { range?: { offset: number; length?: number }; signal?: unknown } | undefined): Promise<BlobObject | null> {
    checkTextId(key, 'key')
    const range = options?.range
    const signal = checkSignal(options?.signal)
    signal?.throwIfAborted()
    let offset = 0
    let length: number | undefined
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
      length = range.length
    }
    const row = await this.firstPiece(key, offset, length, range !== undefined)
    signal?.throwIfAborted()
    if (row === null || row.r === null) return null
    const { range: _first, ...record } = row.r
    const size = record.size ?? 0
    const end = length === undefined ? size : Math.min(size, offset + Math.max(length, 0))
    const first = ownBytes(row.b ?? Buffer.alloc(0))
    const withRange = range === undefined ? record : { ...record, range: { offset, length: end - offset } }
    return streamedObject(new PinnedRead(this, key, withRange, first, offset, end), signal)
  }

  /** The first piece of a get (record included); an empty object is read whole. */
  private async firstPiece(key: string, offset: number, length: number | undefined, ranged: boolean): Promise<BlobRow | null> {
    let row: BlobRow | null = null
    for (let attempt = 0; ; attempt++) {
      try {
        row = await this.readRange(key, offset, length ?? Number.MAX_SAFE_INTEGER)
        break
      } catch (error) {
        // An empty object has no offset 0: read it whole (one more call, empty objects only).
        if (ranged || (error as { sqlstate?: string }).sqlstate !== '22003') throw error
        row = await this.readOnce(key, null, null)
        // Unless it was written between the two calls: then start over.
        if (row === null || row.r === null || (row.r.size ?? 0) === 0 || attempt >= 3) break
      }
    }
    return row
  }

  private async maxRead(): Promise<number> {
    if (this.serverMaxRead === undefined) {
      // current_setting also answers while the setting is only a placeholder
      // (library not loaded yet in this session), which pg_settings does not.
      const setting = await value<string | null>(
        this.db,
        `SELECT pg_catalog.current_setting('sandbox_persist.blob_max_read', true) AS r`,
        [],
      )
      this.serverMaxRead = parseMemory(setting) ?? 512 * MiB
    }
    return Math.min(this.serverMaxRead, this.readPieceBytes)
  }

  /**
   * One blob_get call. Over a pool or a client the bytes travel as they are,
   * in a binary COPY (copy_out.ts): a 1 MiB piece took 22.5 ms against 37.7 ms
   * as base64 text, which the server encodes and this process decodes. Any
   * other `Queryable` gets base64 text (4/3 of the size; bytea's hex is 2x).
   */
  private async readOnce(key: string, offset: number | null, length: number | null): Promise<BlobRow | null> {
    const errors = { detailIsMessage: ['22003'] }
    if (this.binary) {
      const rows = await runCopyOut(
        this.db,
        'blob_get',
        (client) =>
          `COPY (SELECT record::text, body FROM ${SP}.blob_get(${client.escapeLiteral(key)}, ` +
          `${sqlBigint(offset)}, ${sqlBigint(length)})) TO STDOUT (FORMAT binary)`,
        errors,
      )
      const row = rows[0]
      if (row === undefined) return null
      const [record, body] = row
      return { r: record == null ? null : (JSON.parse(record.toString('utf8')) as BlobRow['r']), b: body ?? null }
    }
    const result = await run(
      this.db,
      `SELECT record AS r, pg_catalog.encode(body, 'base64') AS b FROM ${SP}.blob_get($1::text, $2::bigint, $3::bigint)`,
      [key, offset, length],
      errors,
    )
    const row = result.rows[0] as { r: BlobRow['r']; b: string | null } | undefined
    if (row === undefined) return null
    return { r: row.r, b: row.b === null ? null : Buffer.from(row.b, 'base64') }
  }

  /** One ranged read of at most the piece size; a smaller server limit shrinks the piece and retries. */
  async readRange(key: string, at: number, want: number): Promise<BlobRow | null> {
    for (;;) {
      const piece = await this.maxRead()
      try {
        return await this.readOnce(key, at, want < 0 ? want : Math.min(piece, want))
      } catch (error) {
        // The limit is smaller than we believed: halve and retry.
        if ((error as { sqlstate?: string }).sqlstate !== '54000' || piece <= 4096) throw error
        this.serverMaxRead = Math.floor(piece / 2)
      }
    }
  }
}

/**
 * The pieces of one streamed object after its first: the first piece is
 * already read (it carries the record and pins the version); each later piece
 * is checked against the pinned etag, so the bytes are all of one version or
 * the read fails with BLOB_VERSION_CHANGED.
 */
class PinnedRead {
  private readonly etag: unknown

  constructor(
    private readonly reader: BlobReader,
    private readonly key: string,
    readonly record: RangedRecord,
    readonly first: Uint8Array,
    readonly start: number,
    readonly end: number,
  ) {
    this.etag = record.etag
  }

  private changed(why: string): SandboxPersistError {
    return new SandboxPersistError(
      'BLOB_VERSION_CHANGED',
      `Blob ${JSON.stringify(this.key)} ${why} while it was read in pieces (etag ${String(this.etag)}); read it again.`,
    )
  }

  /** The bytes [at, at + want) of the pinned version (more than one call if the server limit shrank). */
  private async readExactly(at: number, want: number): Promise<Uint8Array> {
    const parts: Array<Uint8Array> = []
    let got = 0
    while (got < want) {
      const row = await this.reader.readRange(this.key, at + got, want - got)
      if (row === null || row.r === null) throw this.changed('was deleted')
      if (row.r.etag !== this.etag) throw this.changed('was overwritten')
      const bytes = ownBytes(row.b ?? Buffer.alloc(0))
      if (bytes.byteLength === 0) throw this.changed('was truncated')
      parts.push(bytes)
      got += bytes.byteLength
    }
    return concat(parts, got)
  }

  /**
   * Pieces after the first, in order, each the first piece's size. Up to
   * READ_AHEAD ranged reads run at once (on as many pool connections), so
   * the server prepares the next pieces while this process decodes one.
   */
  async *rest(stop: () => boolean): AsyncGenerator<Uint8Array> {
    const first = this.first
    const end = this.end
    const piece = Math.max(first.byteLength, 1)
    let at = this.start + first.byteLength
    const inflight: Array<Promise<Uint8Array>> = []
    try {
      for (;;) {
        while (inflight.length < READ_AHEAD && at < end && !stop()) {
          const want = Math.min(piece, end - at)
          const reading = this.readExactly(at, want)
          reading.catch(() => undefined)
          inflight.push(reading)
          at += want
        }
        const reading = inflight.shift()
        if (reading === undefined || stop()) return
        yield await reading
      }
    } finally {
      inflight.length = 0
    }
  }

  /** All the bytes [start, end) at once. */
  async whole(signal: AbortSignal | undefined): Promise<Uint8Array> {
    signal?.throwIfAborted()
    const out = new Uint8Array(this.end - this.start)
    out.set(this.first, 0)
    let at = this.first.byteLength
    for await (const bytes of this.rest(() => signal?.aborted === true)) {
      out.set(bytes, at)
      at += bytes.byteLength
    }
    signal?.throwIfAborted()
    return out
  }
}

/** The object `get` returns: the record, a lazily made body stream, arrayBuffer and text. */
function streamedObject(read: PinnedRead, signal: AbortSignal | undefined): BlobObject {
  let body: ReadableStream<Uint8Array> | undefined
  const object: BlobObject = {
    ...read.record,
    arrayBuffer: async () => {
      const bytes = await read.whole(signal)
      return bytes.buffer.byteLength === bytes.byteLength ? (bytes.buffer as ArrayBuffer) : bytes.slice().buffer
    },
    text: async () => new TextDecoder().decode(await read.whole(signal)),
  }
  Object.defineProperty(object, 'body', {
    enumerable: true,
    configurable: true,
    get: () => (body ??= pieceStream(read, signal)),
  })
  return object
}

/**
 * The body stream of a streamed object: the first piece, then the rest as the
 * consumer pulls, with the read-ahead window (PinnedRead.rest) refilled when a
 * piece is handed out; cancel or the signal stops it.
 */
function pieceStream(read: PinnedRead, signal: AbortSignal | undefined): ReadableStream<Uint8Array> {
  const { first, start, end } = read
  let cancelled = false
  let served = false
  let pieces: AsyncGenerator<Uint8Array> | undefined
  // The read-ahead window (rest) is refilled when a piece is handed out.
  let ahead: Promise<IteratorResult<Uint8Array>> | undefined
  const next = () => {
    pieces ??= read.rest(() => cancelled || signal?.aborted === true)
    const p = pieces.next()
    p.catch(() => undefined)
    return p
  }
  let onAbort: (() => void) | undefined
  const cleanup = () => {
    if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort)
    onAbort = undefined
  }
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        if (signal === undefined) return
        if (signal.aborted) {
          cancelled = true
          controller.error(signal.reason)
          return
        }
        onAbort = () => {
          cancelled = true
          cleanup()
          try {
            controller.error(signal.reason)
          } catch {
            // already closed
          }
        }
        signal.addEventListener('abort', onAbort, { once: true })
      },
      async pull(controller) {
        try {
          if (!served) {
            served = true
            if (first.byteLength > 0) controller.enqueue(first.slice())
            if (start + first.byteLength >= end) {
              cleanup()
              controller.close()
              return
            }
            ahead = next()
            return
          }
          const result = await (ahead ?? next())
          ahead = undefined
          if (cancelled) return
          if (result.done === true) {
            cleanup()
            controller.close()
            return
          }
          controller.enqueue(result.value)
          ahead = next()
        } catch (error) {
          cleanup()
          if (!cancelled) controller.error(error)
        }
      },
      async cancel() {
        cancelled = true
        cleanup()
        ahead = undefined
        await pieces?.return(undefined).catch(() => undefined)
      },
    },
    // Pull only when the consumer asks: the read-ahead above is the only buffer.
    { highWaterMark: 0 },
  )
}

export function postgresBlobStore(db: Queryable, options: PostgresBlobStoreOptions = {}): BlobStore {
  const threshold = positiveInteger(options.singleCallThreshold, 8 * MiB, 'singleCallThreshold')
  const pieceBytes = positiveInteger(options.uploadPieceBytes, MiB, 'uploadPieceBytes')
  const readPieceBytes = positiveInteger(options.readPieceBytes, MiB, 'readPieceBytes')
  const writer = new BlobWriter(db, threshold, pieceBytes)
  const reader = new BlobReader(db, readPieceBytes)

  return {
    put: (key, body, options) => writer.put(key, body, options),

    get: (key, options) => reader.get(key, options),

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
