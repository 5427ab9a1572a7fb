/**
 * The blob store through the adapter: the upstream cases (P17-P23), the
 * adapter-side cases (B16, B20 through the adapter, B23, B36, R10) and the body
 * encodings of docs/contract/README.md §6 rules 11 and 12.
 */
import { createHash } from 'node:crypto'
import pg from 'pg'
import { beforeAll, describe, expect, it } from 'vitest'
import { BinaryCopyRows } from '../src/copy_out.js'
import { postgresBlobStore, postgresPersistence, type BlobObject } from '../src/index.js'
import { countingPool, makePool, rejection, reset, rows, until } from './helpers.js'

const pool = makePool()
const blobs = postgresPersistence(pool).stores.blobs

beforeAll(async () => {
  await reset(pool)
})

function required<T>(v: T | null | undefined, what: string): T {
  if (v == null) throw new Error(`expected ${what}`)
  return v
}

async function drain(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = []
  const reader = stream.getReader()
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    parts.push(value)
  }
  return new Uint8Array(Buffer.concat(parts))
}

const pattern = (n: number, mod = 251) => new Uint8Array(n).map((_, i) => i % mod)

function lengthless(bytes: Uint8Array, chunk = 4096): ReadableStream<Uint8Array> {
  let at = 0
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= bytes.byteLength) return controller.close()
      controller.enqueue(bytes.slice(at, at + chunk))
      at += chunk
    },
  }).pipeThrough(new TransformStream<Uint8Array, Uint8Array>())
}

async function bytesOf(o: BlobObject | null): Promise<Uint8Array> {
  return new Uint8Array(await required(o, 'object').arrayBuffer())
}

describe('blobs (upstream cases)', () => {
  it('P17 round-trips bytes and metadata through put/get/head; strings and ArrayBuffers too', async () => {
    expect(await blobs.get('blob-missing')).toBeNull()
    expect(await blobs.head('blob-missing')).toBeNull()
    const bytes = new Uint8Array([1, 2, 3, 4])
    const put = await blobs.put('blob/a', bytes, { contentType: 'image/png', customMetadata: { runId: 'run-blob' } })
    expect(put).toMatchObject({ key: 'blob/a', size: 4, contentType: 'image/png', customMetadata: { runId: 'run-blob' } })
    expect(typeof put.etag).toBe('string')
    expect(typeof put.createdAt).toBe('number')
    const object = required(await blobs.get('blob/a'), 'blob/a')
    expect(await bytesOf(object)).toEqual(bytes)
    expect(object).toMatchObject({ key: 'blob/a', size: 4, contentType: 'image/png', customMetadata: { runId: 'run-blob' } })
    expect(object.range).toBeUndefined()
    expect(await blobs.head('blob/a')).toEqual(put)
    await blobs.put('blob/text', 'héllo')
    expect(await required(await blobs.get('blob/text'), 'text').text()).toBe('héllo')
    await blobs.put('blob/buffer', new Uint8Array([9, 9]).buffer)
    expect(await bytesOf(await blobs.get('blob/buffer'))).toEqual(new Uint8Array([9, 9]))
  })

  it('P18 a 64 KiB stream with no declared length is stored whole', async () => {
    const bytes = pattern(64 * 1024)
    const put = await blobs.put('blob/stream', lengthless(bytes), { contentType: 'application/octet-stream' })
    expect(put.size).toBe(bytes.byteLength)
    const object = required(await blobs.get('blob/stream'), 'blob/stream')
    expect(await bytesOf(object)).toEqual(bytes)
    expect(object.size).toBe(bytes.byteLength)
  })

  it('P19 expectedLength is advisory: the counted size is stored and never sent', async () => {
    const bytes = pattern(9 * 1024)
    const put = await blobs.put('blob/stream-hint', lengthless(bytes), { expectedLength: bytes.byteLength })
    expect(put.size).toBe(bytes.byteLength)
    expect(await bytesOf(await blobs.get('blob/stream-hint'))).toEqual(bytes)
    // A wrong hint changes nothing but the strategy.
    const lie = await blobs.put('blob/stream-lie', lengthless(bytes), { expectedLength: 5 })
    expect(lie.size).toBe(bytes.byteLength)
  })

  it('P20 serves byte ranges and reports the slice it served', async () => {
    const bytes = pattern(1024)
    await blobs.put('blob/range', bytes)
    const middle = required(await blobs.get('blob/range', { range: { offset: 100, length: 50 } }), 'middle')
    expect(await bytesOf(middle)).toEqual(bytes.slice(100, 150))
    expect(middle.size).toBe(1024)
    expect(middle.range).toEqual({ offset: 100, length: 50 })
    const tail = required(await blobs.get('blob/range', { range: { offset: 1000 } }), 'tail')
    expect(await bytesOf(tail)).toEqual(bytes.slice(1000))
    expect(tail.range).toEqual({ offset: 1000, length: 24 })
    const clamped = required(await blobs.get('blob/range', { range: { offset: 1000, length: 1000 } }), 'clamped')
    expect(clamped.range).toEqual({ offset: 1000, length: 24 })
    expect((await clamped.arrayBuffer()).byteLength).toBe(24)
    const streamed = required(await blobs.get('blob/range', { range: { offset: 10, length: 5 } }), 'streamed')
    expect(await drain(required(streamed.body, 'body'))).toEqual(bytes.slice(10, 15))
    const whole = required(await blobs.get('blob/range'), 'whole')
    expect(whole.range).toBeUndefined()
    expect('range' in whole).toBe(false)
  })

  it('P21 overwrite replaces bytes and metadata with a new etag; delete is silent', async () => {
    const first = await blobs.put('blob/over', new Uint8Array([1]), { contentType: 'text/plain', customMetadata: { v: '1' } })
    const second = await blobs.put('blob/over', new Uint8Array([2, 2, 2]), {
      contentType: 'application/octet-stream',
      customMetadata: { v: '2' },
    })
    expect(second).toMatchObject({ size: 3, contentType: 'application/octet-stream', customMetadata: { v: '2' } })
    expect(second.etag).not.toBe(first.etag)
    expect(second.createdAt).toBe(first.createdAt)
    expect(await bytesOf(await blobs.get('blob/over'))).toEqual(new Uint8Array([2, 2, 2]))
    const third = await blobs.put('blob/over', new Uint8Array([3]))
    expect('contentType' in third || 'customMetadata' in third).toBe(false)
    await expect(blobs.delete('blob/over')).resolves.toBeUndefined()
    expect(await blobs.get('blob/over')).toBeNull()
    expect(await blobs.head('blob/over')).toBeNull()
    await expect(blobs.delete('blob/over')).resolves.toBeUndefined()
  })

  it('P22 prefixes are literal and case-sensitive', async () => {
    for (const [key, b] of [['list_/b', 2], ['list_/a', 1], ['list_/c', 3], ['list-x/d', 4], ['LIST_/e', 5]] as const) {
      await blobs.put(key, new Uint8Array([b]))
    }
    const page = await blobs.list({ prefix: 'list_/' })
    expect(page.objects.map((o) => o.key)).toEqual(['list_/a', 'list_/b', 'list_/c'])
    expect(page.truncated).toBe(false)
    expect(page.cursor).toBeUndefined()
    expect((await blobs.list({ prefix: 'list_/nothing-here' })).objects).toEqual([])
  })

  it('P23 pages with a cursor (the last key, verbatim); limit 0 and exact fit are not truncated', async () => {
    for (const key of ['page/a', 'page/b', 'page/c', 'page/d', 'page/e']) await blobs.put(key, new Uint8Array([1]))
    const empty = await blobs.list({ prefix: 'page/', limit: 0 })
    expect(empty).toEqual({ objects: [], truncated: false })
    const seen: string[] = []
    let cursor: string | undefined
    for (let guard = 0; guard < 10; guard++) {
      const result = await blobs.list({ prefix: 'page/', limit: 2, ...(cursor !== undefined ? { cursor } : {}) })
      seen.push(...result.objects.map((o) => o.key))
      if (!result.truncated) break
      expect(result.cursor).toBe(result.objects.at(-1)?.key)
      cursor = result.cursor
    }
    expect(seen).toEqual(['page/a', 'page/b', 'page/c', 'page/d', 'page/e'])
    const exact = await blobs.list({ prefix: 'page/', limit: 5 })
    expect(exact.objects.map((o) => o.key)).toEqual(seen)
    expect(exact.truncated).toBe(false)
    expect(exact.cursor).toBeUndefined()
  })
})

describe('blobs (adapter cases)', () => {
  it("B16 a string body's size is its UTF-8 byte count", async () => {
    const put = await blobs.put('b16', 'héllo')
    expect(put.size).toBe(6)
    expect((await blobs.head('b16'))?.size).toBe(6)
    const emoji = await blobs.put('b16-astral', '😀')
    expect(emoji.size).toBe(4)
  })

  it("B23 arrayBuffer() holds exactly the object's bytes although the driver's Buffer is a pool-slab view", async () => {
    await blobs.put('b23', new Uint8Array([7, 8, 9]))
    // The trap is real: node-postgres hands back a small Buffer from the shared pool.
    const [raw] = await rows<{ b: Buffer }>(pool, `SELECT body AS b FROM sandbox_persist.blob_get('b23')`)
    expect(raw?.b.byteLength).toBe(3)
    expect(raw!.b.buffer.byteLength).toBeGreaterThan(3)
    const object = required(await blobs.get('b23'), 'b23')
    const buffer = await object.arrayBuffer()
    expect(buffer.byteLength).toBe(3)
    expect([...new Uint8Array(buffer)]).toEqual([7, 8, 9])
    // Each call is a fresh copy.
    new Uint8Array(buffer)[0] = 0
    expect([...new Uint8Array(await object.arrayBuffer())]).toEqual([7, 8, 9])
  })

  it('R10 a fractional range offset or length is a RangeError without a server call', async () => {
    const counted = countingPool(pool)
    const store = postgresBlobStore(counted.db)
    const offset = await rejection(store.get('blob/range', { range: { offset: 1.5 } }))
    expect(offset).toBeInstanceOf(RangeError)
    expect(offset.message).toContain('Blob range offset 1.5 is outside the object')
    const length = await rejection(store.get('blob/range', { range: { offset: 1, length: 2.5 } }))
    expect(length).toBeInstanceOf(RangeError)
    expect(length.message).toBe('Blob range length 2.5 is not valid.')
    expect(counted.count()).toBe(0)
  })

  it('server range errors (R8, R12, R13, B15) arrive as RangeError with the upstream texts', async () => {
    await blobs.put('r8', new Uint8Array([1, 2, 3, 4]))
    const outside = await rejection(blobs.get('r8', { range: { offset: 4 } }))
    expect(outside).toBeInstanceOf(RangeError)
    expect(outside.message).toBe('Blob range offset 4 is outside the object (size 4).')
    const negative = await rejection(blobs.get('r8', { range: { offset: 0, length: -1 } }))
    expect(negative).toBeInstanceOf(RangeError)
    expect(negative.message).toBe('Blob range length -1 is not valid.')
    const zero = required(await blobs.get('r8', { range: { offset: 2, length: 0 } }), 'zero')
    expect(zero.range).toEqual({ offset: 2, length: 0 })
    expect((await zero.arrayBuffer()).byteLength).toBe(0)
    await blobs.put('empty', new Uint8Array(0))
    expect((await blobs.head('empty'))?.size).toBe(0)
    expect(await bytesOf(await blobs.get('empty'))).toEqual(new Uint8Array(0))
    await expect(blobs.get('empty', { range: { offset: 0 } })).rejects.toBeInstanceOf(RangeError)
  })

  it('a negative or fractional list limit is a RangeError', async () => {
    await expect(blobs.list({ limit: -1 })).rejects.toBeInstanceOf(RangeError)
    await expect(blobs.list({ limit: 1.5 })).rejects.toBeInstanceOf(RangeError)
  })

  it('every BlobBody kind: a view contributes exactly its window, a Blob its bytes and type', async () => {
    const backing = new Uint8Array([0, 1, 2, 3, 4, 5, 6, 7])
    await blobs.put('view', new Uint8Array(backing.buffer, 2, 3))
    expect([...(await bytesOf(await blobs.get('view')))]).toEqual([2, 3, 4])
    await blobs.put('dataview', new DataView(backing.buffer, 5, 2))
    expect([...(await bytesOf(await blobs.get('dataview')))]).toEqual([5, 6])
    await blobs.put('node-buffer', Buffer.from('abc'))
    expect(await required(await blobs.get('node-buffer'), 'nb').text()).toBe('abc')
    const blob = new Blob(['typed'], { type: 'text/x-test' })
    const put = await blobs.put('blob-kind', blob)
    expect(put).toMatchObject({ size: 5, contentType: 'text/x-test' })
    const explicit = await blobs.put('blob-kind-2', blob, { contentType: 'text/plain' })
    expect(explicit.contentType).toBe('text/plain')
    await expect(blobs.put('bad', 42 as never)).rejects.toBeInstanceOf(TypeError)
    await expect(blobs.put('bad', new Blob([]), { contentType: 'a', customMetadata: { n: 1 } as never })).rejects.toBeInstanceOf(TypeError)
    expect(await blobs.head('bad')).toBeNull()
  })

  it('large bodies stream through the upload protocol in pieces; a failing stream aborts and leaves the old object', async () => {
    const store = postgresBlobStore(pool, { singleCallThreshold: 1024, uploadPieceBytes: 1000 })
    const bytes = pattern(10_000, 253)
    const put = await store.put('upload/big', bytes, { contentType: 'application/x-big' })
    expect(put).toMatchObject({ size: 10_000, contentType: 'application/x-big' })
    expect(await bytesOf(await store.get('upload/big'))).toEqual(bytes)
    const streamed = await store.put('upload/big', lengthless(bytes, 777))
    expect(streamed.size).toBe(10_000)
    expect(streamed.createdAt).toBe(put.createdAt)
    expect(streamed.etag).not.toBe(put.etag)
    expect(await bytesOf(await store.get('upload/big'))).toEqual(bytes)

    const viaBlob = await store.put('upload/blob', new Blob([bytes], { type: 'application/x-blob' }))
    expect(viaBlob).toMatchObject({ size: 10_000, contentType: 'application/x-blob' })
    expect(await bytesOf(await store.get('upload/blob'))).toEqual(bytes)
    const empty = await store.put('upload/empty', lengthless(new Uint8Array(0)))
    expect(empty.size).toBe(0)
    expect(await bytesOf(await store.get('upload/empty'))).toEqual(new Uint8Array(0))

    let pulls = 0
    const failing = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulls += 1
        if (pulls > 3) return controller.error(new Error('origin went away'))
        controller.enqueue(pattern(1500))
      },
    })
    const error = await rejection(store.put('upload/big', failing))
    expect(error.message).toBe('origin went away')
    expect(await bytesOf(await store.get('upload/big'))).toEqual(bytes)
    expect(await rows(pool, 'SELECT 1 FROM sandbox_persist.blob_uploads')).toEqual([])
  })

  it('content-addressed keys: a hash mismatch keeps its code and stores nothing', async () => {
    const bytes = new TextEncoder().encode('content')
    const key = `sandbox-files/sha256/${createHash('sha256').update(bytes).digest('hex')}`
    const put = await blobs.put(key, bytes)
    expect(put.size).toBe(bytes.byteLength)
    const wrong = `sandbox-files/sha256/${'0'.repeat(64)}`
    const error = await rejection(blobs.put(wrong, bytes))
    expect(error.code).toBe('BLOB_CONTENT_HASH_MISMATCH')
    expect(await blobs.head(wrong)).toBeNull()
    const store = postgresBlobStore(pool, { singleCallThreshold: 1, uploadPieceBytes: 3 })
    const viaUpload = await rejection(store.put(wrong, bytes))
    expect(viaUpload.code).toBe('BLOB_CONTENT_HASH_MISMATCH')
    expect(await rows(pool, 'SELECT 1 FROM sandbox_persist.blob_uploads')).toEqual([])
  })

  it('B20 objects above blob_max_read are read through successive ranged reads', async () => {
    // A session with a tiny single-call limit (a superuser may set it per connection).
    const small = makePool({ max: 2, options: '-c sandbox_persist.blob_max_read=8kB' })
    const store = postgresBlobStore(small)
    const bytes = pattern(50_000, 241)
    await store.put('b20/big', bytes)
    const raw = await rejection(small.query(`SELECT body FROM sandbox_persist.blob_get('b20/big')`))
    expect(raw.code).toBe('54000')
    const whole = required(await store.get('b20/big'), 'b20')
    expect(whole.size).toBe(50_000)
    expect(whole.range).toBeUndefined()
    expect(await bytesOf(whole)).toEqual(bytes)
    const ranged = required(await store.get('b20/big', { range: { offset: 1234, length: 30_000 } }), 'ranged')
    expect(ranged.range).toEqual({ offset: 1234, length: 30_000 })
    expect(await bytesOf(ranged)).toEqual(bytes.slice(1234, 31_234))
  })

  it('identifier checks: a non-string key is a TypeError before any call', async () => {
    const counted = countingPool(pool)
    const store = postgresBlobStore(counted.db)
    await expect(store.get({} as never)).rejects.toBeInstanceOf(TypeError)
    await expect(store.put(7 as never, 'x')).rejects.toBeInstanceOf(TypeError)
    await expect(store.list({ prefix: 'a\ud800' })).rejects.toBeInstanceOf(TypeError)
    expect(counted.count()).toBe(0)
  })
})

/** A pool wrapper counting the statements that contain `marker` (e.g. 'blob_get'). */
function countingCalls(marker: string): { db: { query: typeof pool.query }; calls: () => number } {
  let n = 0
  const db = {
    query: ((...args: unknown[]) => {
      const text = typeof args[0] === 'string' ? args[0] : ''
      if (text.includes(marker)) n += 1
      return (pool.query as (...a: unknown[]) => unknown)(...args)
    }) as typeof pool.query,
  }
  return { db, calls: () => n }
}

const settle = () => new Promise<void>((resolve) => setTimeout(resolve, 60))

describe('blobs: streamed reads, back-pressure, cancellation, consistency, AbortSignal (issue 11)', () => {
  const size = 10_000
  const piece = 1000
  const bytes = pattern(size, 239)

  it('get reads one piece; the body reads the rest piece by piece, exactly', async () => {
    await blobs.put('stream/pieces', bytes, { contentType: 'application/x-s' })
    const counted = countingCalls('blob_get')
    const store = postgresBlobStore(counted.db, { readPieceBytes: piece })
    const object = required(await store.get('stream/pieces'), 'object')
    expect(counted.calls()).toBe(1)
    expect(object).toMatchObject({ key: 'stream/pieces', size, contentType: 'application/x-s' })
    expect('range' in object).toBe(false)
    const reader = required(object.body, 'body').getReader()
    const seen: Uint8Array[] = []
    for (;;) {
      const next = await reader.read()
      if (next.done) break
      expect(next.value.byteLength).toBeLessThanOrEqual(piece)
      // each piece owns its buffer (never a view into a shared slab)
      expect(next.value.buffer.byteLength).toBe(next.value.byteLength)
      seen.push(next.value)
    }
    expect(seen.length).toBe(size / piece)
    expect(Buffer.concat(seen)).toEqual(Buffer.from(bytes))
    expect(counted.calls()).toBe(size / piece)
    // arrayBuffer() and text() read the same version again, whole
    expect(new Uint8Array(await object.arrayBuffer())).toEqual(bytes)
    const ranged = required(await store.get('stream/pieces', { range: { offset: 1500, length: 3200 } }), 'ranged')
    expect(ranged.range).toEqual({ offset: 1500, length: 3200 })
    expect(await drain(required(ranged.body, 'body'))).toEqual(bytes.slice(1500, 4700))
    expect(new Uint8Array(await ranged.arrayBuffer())).toEqual(bytes.slice(1500, 4700))
  })

  it('back-pressure: the body reads at most two pieces ahead of the consumer', async () => {
    await blobs.put('stream/bp', bytes)
    const counted = countingCalls('blob_get')
    const store = postgresBlobStore(counted.db, { readPieceBytes: piece })
    const object = required(await store.get('stream/bp'), 'object')
    const body = required(object.body, 'body')
    await settle()
    expect(counted.calls()).toBe(1) // nothing is read before the consumer asks
    const reader = body.getReader()
    for (let consumed = 1; consumed <= 4; consumed++) {
      await reader.read()
      await settle()
      // `consumed` pieces handed out, at most two more fetched
      expect(counted.calls()).toBeLessThanOrEqual(consumed + 2)
      expect(counted.calls()).toBeGreaterThanOrEqual(consumed)
    }
    await reader.cancel()
  })

  it('cancelling the body stops reading', async () => {
    await blobs.put('stream/cancel', bytes)
    const counted = countingCalls('blob_get')
    const store = postgresBlobStore(counted.db, { readPieceBytes: piece })
    const reader = required(required(await store.get('stream/cancel'), 'o').body, 'body').getReader()
    await reader.read()
    await reader.read()
    await reader.cancel()
    await settle()
    const after = counted.calls()
    // two pieces handed out (the second read from the server), at most two read ahead
    expect(after).toBeGreaterThanOrEqual(2)
    expect(after).toBeLessThanOrEqual(4)
    await settle()
    expect(counted.calls()).toBe(after)
    expect((await reader.read()).done).toBe(true)
  })

  it('an AbortSignal rejects get, errors the body with its reason and stops reading', async () => {
    await blobs.put('stream/abort', bytes)
    const counted = countingCalls('blob_get')
    const store = postgresBlobStore(counted.db, { readPieceBytes: piece })
    const early = new AbortController()
    early.abort()
    const refused = await rejection(store.get('stream/abort', { signal: early.signal }))
    expect(refused.name).toBe('AbortError')
    expect(counted.calls()).toBe(0)

    const controller = new AbortController()
    const object = required(await store.get('stream/abort', { signal: controller.signal }), 'object')
    const reader = required(object.body, 'body').getReader()
    await reader.read()
    await reader.read()
    const reason = new Error('client went away')
    controller.abort(reason)
    await expect(reader.read()).rejects.toBe(reason)
    await expect(object.arrayBuffer()).rejects.toBe(reason)
    await settle()
    const after = counted.calls()
    expect(after).toBeLessThanOrEqual(4)
    await settle()
    expect(counted.calls()).toBe(after)
    await expect(store.get('stream/abort', { signal: 'no' as never })).rejects.toBeInstanceOf(TypeError)
  })

  it('an object overwritten or deleted mid-read fails the read (BLOB_VERSION_CHANGED); never mixed versions', async () => {
    const store = postgresBlobStore(pool, { readPieceBytes: piece })
    await store.put('stream/over', bytes)
    const object = required(await store.get('stream/over'), 'object')
    const reader = required(object.body, 'body').getReader()
    const first = await reader.read()
    expect(first.value).toEqual(bytes.slice(0, piece))
    const second = pattern(size, 241)
    const put = await store.put('stream/over', second)
    expect(put.etag).not.toBe(object.etag)
    let error: (Error & Record<string, unknown>) | undefined
    try {
      // the read-ahead piece may still be the old version's; never the new one's
      for (let i = 1; ; i++) {
        const next = await reader.read()
        if (next.done) break
        expect(next.value).toEqual(bytes.slice(i * piece, (i + 1) * piece))
      }
    } catch (e) {
      error = e as Error & Record<string, unknown>
    }
    expect(error?.code).toBe('BLOB_VERSION_CHANGED')
    expect(error?.message).toContain('was overwritten')
    await expect(object.arrayBuffer()).rejects.toMatchObject({ code: 'BLOB_VERSION_CHANGED' })
    // a fresh get reads the new version
    expect(new Uint8Array(await required(await store.get('stream/over'), 'again').arrayBuffer())).toEqual(second)

    const doomed = required(await store.get('stream/over'), 'doomed')
    await store.delete('stream/over')
    await expect(doomed.text()).rejects.toMatchObject({ code: 'BLOB_VERSION_CHANGED', message: expect.stringContaining('was deleted') })
  })

  it('an AbortSignal stops a streamed put between pieces: the upload is aborted, the old object kept', async () => {
    const store = postgresBlobStore(pool, { singleCallThreshold: 1024, uploadPieceBytes: 1000 })
    await store.put('stream/put-abort', bytes)
    const early = new AbortController()
    early.abort()
    const counted = countingCalls('blob_')
    const countedStore = postgresBlobStore(counted.db, { singleCallThreshold: 1024, uploadPieceBytes: 1000 })
    expect((await rejection(countedStore.put('stream/put-abort', 'x', { signal: early.signal }))).name).toBe('AbortError')
    expect((await rejection(countedStore.put('stream/put-abort', pattern(5000), { signal: early.signal }))).name).toBe('AbortError')
    expect(counted.calls()).toBe(0)

    // A source that pauses forever after three chunks: the abort ends the wait.
    const controller = new AbortController()
    let pulls = 0
    let cancelledWith: unknown
    const stalled = new ReadableStream<Uint8Array>({
      pull(c) {
        pulls += 1
        if (pulls <= 3) c.enqueue(pattern(1500, 17))
        else return new Promise<void>(() => undefined)
      },
      cancel(reason) {
        cancelledWith = reason
      },
    })
    const pending = store.put('stream/put-abort', stalled, { signal: controller.signal, contentType: 'text/x-new' })
    await until(() => pulls > 3) // the put has taken the three chunks and waits on the source
    const reason = new Error('user cancelled the upload')
    controller.abort(reason)
    await expect(pending).rejects.toBe(reason)
    expect(cancelledWith).toBe(reason)
    expect(await rows(pool, 'SELECT 1 FROM sandbox_persist.blob_uploads')).toEqual([])
    const kept = required(await store.get('stream/put-abort'), 'kept')
    expect(kept.contentType).toBeUndefined()
    expect(new Uint8Array(await kept.arrayBuffer())).toEqual(bytes)

    // The signal is never sent as metadata.
    const fine = await store.put('stream/put-signal', 'ok', { signal: new AbortController().signal, contentType: 'text/plain' })
    expect(fine).toMatchObject({ size: 2, contentType: 'text/plain' })
    expect('customMetadata' in fine).toBe(false)
  })
})

/** Every byte value, several times over, in an order no codec shortens much. */
const allBytes = (n: number) => new Uint8Array(n).map((_, i) => (i * 7 + (i >> 8)) & 255)

/** A pool whose clients count the COPY submittables and the text queries they are given. */
function watchedPool(config: pg.PoolConfig = {}): { pool: pg.Pool; copies: () => number; texts: () => string[] } {
  const watched = makePool(config)
  let copies = 0
  const texts: string[] = []
  watched.on('connect', (client) => {
    const query = client.query.bind(client) as (...a: unknown[]) => unknown
    client.query = ((...args: unknown[]) => {
      const first = args[0] as { submit?: unknown } | string
      if (typeof first === 'object' && first !== null && typeof first.submit === 'function') copies += 1
      else if (typeof first === 'string') texts.push(first)
      return query(...args)
    }) as typeof client.query
  })
  return { pool: watched, copies: () => copies, texts: () => texts }
}

describe('blobs: bodies read as bytes through a binary COPY (issue 33)', () => {
  it('B36.1 over a pool a get is one COPY and returns every byte value exactly, whole and ranged', async () => {
    const w = watchedPool()
    const store = postgresBlobStore(w.pool, { readPieceBytes: 4096 })
    const bytes = allBytes(10_000)
    await store.put('b36/all', bytes)
    const before = w.copies()
    const object = required(await store.get('b36/all'), 'object')
    expect(new Uint8Array(await object.arrayBuffer())).toEqual(bytes)
    expect(w.copies() - before).toBe(Math.ceil(10_000 / 4096))
    expect(w.texts().some((t) => t.includes('blob_get'))).toBe(false)
    const ranged = required(await store.get('b36/all', { range: { offset: 4000, length: 3000 } }), 'range')
    expect(new Uint8Array(await ranged.arrayBuffer())).toEqual(bytes.slice(4000, 7000))
    expect(ranged.range).toEqual({ offset: 4000, length: 3000 })
  })

  it('B36.2 an empty object, an absent key and a server error come back as through a query', async () => {
    const w = watchedPool()
    const store = postgresBlobStore(w.pool)
    await store.put('b36/empty', new Uint8Array(0))
    const empty = required(await store.get('b36/empty'), 'empty')
    expect(empty.size).toBe(0)
    expect((await empty.arrayBuffer()).byteLength).toBe(0)
    expect(await store.get('b36/absent')).toBeNull()
    await store.put('b36/four', new Uint8Array([1, 2, 3, 4]))
    const outside = await rejection(store.get('b36/four', { range: { offset: 4 } }))
    expect(outside).toBeInstanceOf(RangeError)
    expect(outside.message).toBe('Blob range offset 4 is outside the object (size 4).')
    expect(w.copies()).toBeGreaterThanOrEqual(3)
    // the connection that carried the error serves the next call
    expect(new Uint8Array(await required(await store.get('b36/four'), 'four').arrayBuffer())).toEqual(new Uint8Array([1, 2, 3, 4]))
  })

  it('B36.3 keys with quotes and backslashes are quoted safely, with standard_conforming_strings on and off', async () => {
    for (const setting of ['on', 'off']) {
      const w = watchedPool({ options: `-c standard_conforming_strings=${setting}` })
      const store = postgresBlobStore(w.pool)
      const key = `b36/it's a \\ "key" \\' ${setting}`
      await store.put(key, allBytes(300))
      const object = required(await store.get(key), key)
      expect(object.key).toBe(key)
      expect(new Uint8Array(await object.arrayBuffer())).toEqual(allBytes(300))
      expect(await store.get(`${key}' OR 'x'='x`)).toBeNull()
      expect(w.copies()).toBeGreaterThan(0)
    }
  })

  it('B36.4 one pg.Client reads through a COPY too; another Queryable reads base64 text', async () => {
    const client = new pg.Client()
    await client.connect()
    try {
      let copies = 0
      const query = client.query.bind(client) as (...a: unknown[]) => unknown
      client.query = ((...args: unknown[]) => {
        if (typeof (args[0] as { submit?: unknown }).submit === 'function') copies += 1
        return query(...args)
      }) as typeof client.query
      const store = postgresBlobStore(client)
      await store.put('b36/client', allBytes(2000))
      expect(new Uint8Array(await required(await store.get('b36/client'), 'client').arrayBuffer())).toEqual(allBytes(2000))
      expect(copies).toBe(1)
    } finally {
      await client.end()
    }
    const counted = countingCalls('encode(body')
    const store = postgresBlobStore(counted.db)
    expect(new Uint8Array(await required(await store.get('b36/client'), 'wrapped').arrayBuffer())).toEqual(allBytes(2000))
    expect(counted.calls()).toBe(1)
  })
})

describe('BinaryCopyRows (copy_out.ts)', () => {
  /** A binary COPY stream of rows, as PostgreSQL writes it, with an optional header extension. */
  function stream(rowsIn: Array<Array<Buffer | null>>, extension = Buffer.alloc(0)): Buffer {
    const parts: Buffer[] = [Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(4)]
    const ext = Buffer.alloc(4)
    ext.writeInt32BE(extension.length)
    parts.push(ext, extension)
    for (const row of rowsIn) {
      const count = Buffer.alloc(2)
      count.writeInt16BE(row.length)
      parts.push(count)
      for (const field of row) {
        const length = Buffer.alloc(4)
        length.writeInt32BE(field === null ? -1 : field.length)
        parts.push(length)
        if (field !== null) parts.push(field)
      }
    }
    const trailer = Buffer.alloc(2)
    trailer.writeInt16BE(-1)
    parts.push(trailer)
    return Buffer.concat(parts)
  }

  it('B36.5 rows read the same however the stream is cut, header extension, NULL and empty fields included', () => {
    const rowsIn = [[Buffer.from('{"a":1}'), Buffer.from(allBytes(700))], [null, Buffer.alloc(0)], []]
    const data = stream(rowsIn, Buffer.from('ext'))
    for (const cut of [1, 2, 3, 5, 7, 64, data.length]) {
      const parsed = new BinaryCopyRows()
      for (let at = 0; at < data.length; at += cut) parsed.push(data.subarray(at, at + cut))
      expect(parsed.finish()).toEqual(rowsIn)
    }
    // every field owns its memory: the input may be overwritten afterwards
    const parsed = new BinaryCopyRows()
    const copy = Buffer.from(data)
    parsed.push(copy)
    copy.fill(0)
    expect(parsed.finish()).toEqual(rowsIn)
  })

  it('B36.6 a stream without the signature, cut before its trailer, or with bytes after it is refused', () => {
    const data = stream([[Buffer.from('x')]])
    const bad = Buffer.from(data)
    bad[0] = 0x51
    expect(() => new BinaryCopyRows().push(bad)).toThrow('without its signature')
    const short = new BinaryCopyRows()
    short.push(data.subarray(0, data.length - 2))
    expect(() => short.finish()).toThrow('ended before its trailer')
    expect(() => new BinaryCopyRows().push(Buffer.concat([data, Buffer.from([0])]))).toThrow('after its trailer')
  })
})
