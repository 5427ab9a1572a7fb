/** GET: catch-up reads (PROTOCOL.md §5.6) and long-poll (§5.7), with ETags (§10.1). */
import { cacheableFor, errorResponse, respond, type HandlerContext } from './context.js'
import { nextCursor } from './cursor.js'
import { streamRead, type ReadMeta } from './db.js'
import { H, isJsonType, type ReadQuery } from './headers.js'
import { refusal } from './refusals.js'

/** Whether a read returned entries (an empty read starts where it ends). */
export const hasData = (meta: ReadMeta): boolean => meta.startOffset !== meta.nextOffset

/** The body to send: a JSON stream's empty read is `[]` (§9.1.5). */
export function readBody(meta: ReadMeta, body: Buffer): Buffer {
  if (isJsonType(meta.contentType) && (body.length === 0 || !hasData(meta))) return Buffer.from('[]')
  return body
}

export function etagOf(meta: ReadMeta): string {
  return `"${meta.streamId}:${meta.startOffset}:${meta.nextOffset}${meta.closed ? ':c' : ''}"`
}

/** Whether `If-None-Match` names `etag` (weak comparison, lists, `*`). */
function matches(ifNoneMatch: string | null, etag: string): boolean {
  if (ifNoneMatch === null) return false
  return ifNoneMatch.split(',').some((t) => {
    const tag = t.trim().replace(/^W\//, '')
    return tag === '*' || tag === etag
  })
}

/** The headers every read response carries. */
function readHeaders(meta: ReadMeta): Record<string, string | undefined> {
  return {
    'Content-Type': meta.contentType,
    [H.nextOffset]: meta.nextOffset,
    [H.upToDate]: meta.upToDate ? 'true' : undefined,
    [H.closed]: meta.closed ? 'true' : undefined,
  }
}

/** The refusal a live reader gets past `maxLiveReaders`. */
export function tooManyReaders(ctx: HandlerContext): Response {
  return errorResponse(503, 'Too many live readers; retry later.', { 'Retry-After': String(ctx.options.retryAfterSeconds) })
}

export async function handleCatchUp(ctx: HandlerContext, request: Request, path: string, query: ReadQuery): Promise<Response> {
  try {
    const { meta, body } = await streamRead(ctx.pool, path, query.offset, ctx.options.maxReadBytes)
    const headers = readHeaders(meta)
    const cursor = meta.closed ? undefined : nextCursor(query.cursor)
    if (query.offset === 'now') {
      return respond(200, { ...headers, [H.upToDate]: 'true', [H.cursor]: cursor, 'Cache-Control': 'no-store' }, readBody(meta, Buffer.alloc(0)))
    }
    const etag = etagOf(meta)
    const cache = { ETag: etag, 'Cache-Control': cacheableFor(request), [H.cursor]: cursor }
    if (matches(request.headers.get('if-none-match'), etag)) return respond(304, { ...headers, ...cache, 'Content-Type': undefined })
    return respond(200, { ...headers, ...cache }, readBody(meta, body))
  } catch (error) {
    return refusal(ctx, error, path)
  }
}

export async function handleLongPoll(ctx: HandlerContext, request: Request, path: string, query: ReadQuery): Promise<Response> {
  if (ctx.live.count >= ctx.options.maxLiveReaders) return tooManyReaders(ctx)
  ctx.live.count++
  const follower = ctx.waiters.follow()
  try {
    const deadline = performance.now() + ctx.options.longPollTimeoutMs
    let offset = query.offset
    for (;;) {
      follower.reset()
      const { meta, body } = await streamRead(ctx.pool, path, offset, ctx.options.maxReadBytes)
      follower.place(meta.streamId)
      const fromNow = offset === 'now'
      if (!fromNow && hasData(meta)) {
        return respond(200, {
          ...readHeaders(meta),
          ETag: etagOf(meta),
          [H.cursor]: meta.closed ? undefined : nextCursor(query.cursor),
          'Cache-Control': cacheableFor(request),
        }, readBody(meta, body))
      }
      offset = meta.nextOffset
      const left = deadline - performance.now()
      if (meta.closed || left <= 0) return noData(meta, query)
      const how = await follower.wait(left, request.signal)
      if (how !== 'wake') return noData(meta, query)
    }
  } catch (error) {
    return refusal(ctx, error, path)
  } finally {
    follower.leave()
    ctx.live.count--
  }
}

/** 204: nothing new before the timeout (or the stream is closed at its tail, or the server is closing). */
function noData(meta: ReadMeta, query: ReadQuery): Response {
  return respond(204, {
    [H.nextOffset]: meta.nextOffset,
    [H.upToDate]: 'true',
    [H.closed]: meta.closed ? 'true' : undefined,
    [H.cursor]: meta.closed ? undefined : nextCursor(query.cursor),
    'Cache-Control': 'no-store',
  })
}
