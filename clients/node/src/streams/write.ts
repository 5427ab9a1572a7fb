/** PUT (create or fork), POST (append, close), DELETE and HEAD (PROTOCOL.md §5.1-§5.5). */
import { readBody } from './body.js'
import { respond, type HandlerContext } from './context.js'
import { streamAppend, streamCreate, streamDelete, streamHead, type AppendOptions, type CreateOptions, type StreamMeta } from './db.js'
import {
  closedHeader, formatExpiresAt, H, HttpError, parseExpiresAt, parseFork, parseProducer, parseTtl,
} from './headers.js'
import { refusal } from './refusals.js'

const DEFAULT_CONTENT_TYPE = 'application/octet-stream'

/** Stream-TTL / Stream-Expires-At of a stream's metadata. */
function expiryHeaders(meta: StreamMeta): Record<string, string | undefined> {
  return {
    [H.ttl]: meta.ttlSeconds == null ? undefined : String(meta.ttlSeconds),
    [H.expiresAt]: meta.expiresAt == null ? undefined : formatExpiresAt(Number(meta.expiresAt)),
  }
}

export async function handleCreate(ctx: HandlerContext, request: Request, path: string, toStreamPath: (p: string) => string): Promise<Response> {
  try {
    const headers = request.headers
    const ttlSeconds = parseTtl(headers.get(H.ttl))
    const expiresAt = parseExpiresAt(headers.get(H.expiresAt))
    if (ttlSeconds !== undefined && expiresAt !== undefined) throw new HttpError(400, 'Give Stream-TTL or Stream-Expires-At, not both.')
    const fork = parseFork(headers, toStreamPath)
    const given = headers.get('content-type')
    // A fork without Content-Type inherits its source's (NULL); any other stream defaults to octet-stream.
    const contentType = given !== null && given.trim() !== '' ? given.trim() : fork !== undefined ? null : DEFAULT_CONTENT_TYPE
    const options: CreateOptions = {
      ...(ttlSeconds === undefined ? {} : { ttlSeconds }),
      ...(expiresAt === undefined ? {} : { expiresAt }),
      ...(closedHeader(headers) ? { closed: true } : {}),
      ...(fork ?? {}),
    }
    const body = await readBody(request, ctx.options.maxBodyBytes)
    const result = await streamCreate(ctx.pool, path, contentType, options, body.length === 0 ? null : body)
    const url = new URL(request.url)
    return respond(result.created ? 201 : 200, {
      'Content-Type': result.contentType,
      [H.nextOffset]: result.nextOffset,
      [H.closed]: result.closed ? 'true' : undefined,
      Location: result.created ? `${url.origin}${url.pathname}` : undefined,
      'Cache-Control': 'no-store',
    })
  } catch (error) {
    return refusal(ctx, error, path)
  }
}

export async function handleAppend(ctx: HandlerContext, request: Request, path: string): Promise<Response> {
  let producer
  try {
    const headers = request.headers
    producer = parseProducer(headers)
    const close = closedHeader(headers)
    const streamSeq = headers.get(H.seq)
    const body = await readBody(request, ctx.options.maxBodyBytes)
    const given = headers.get('content-type')
    const contentType = given !== null && given.trim() !== '' ? given.trim() : null
    if (body.length > 0 && contentType === null) throw new HttpError(400, 'An append with a body needs a Content-Type.')
    if (body.length === 0 && !close) throw new HttpError(400, 'An append needs a body (or Stream-Closed: true to close).')
    const options: AppendOptions = {
      ...(close ? { close: true } : {}),
      ...(producer ?? {}),
      ...(streamSeq === null ? {} : { streamSeq }),
      ...(producer !== undefined && ctx.options.streamFencePrefixes.some((p) => path.startsWith(p)) ? { streamFence: true } : {}),
    }
    const result = await streamAppend(ctx.pool, path, body.length === 0 ? null : contentType, body, options)
    const fresh = result.outcome === 'appended' && body.length > 0 && producer !== undefined
    return respond(fresh ? 200 : 204, {
      [H.nextOffset]: result.nextOffset,
      [H.closed]: result.closed ? 'true' : undefined,
      [H.producerEpoch]: producer === undefined ? undefined : String(result.producerEpoch ?? producer.producerEpoch),
      [H.producerSeq]: producer === undefined ? undefined : String(result.producerSeq ?? producer.producerSeq),
    })
  } catch (error) {
    return refusal(ctx, error, path, producer)
  }
}

export async function handleDelete(ctx: HandlerContext, path: string): Promise<Response> {
  try {
    await streamDelete(ctx.pool, path)
    return respond(204)
  } catch (error) {
    return refusal(ctx, error, path)
  }
}

export async function handleHead(ctx: HandlerContext, path: string): Promise<Response> {
  try {
    const head = await streamHead(ctx.pool, path)
    return respond(200, {
      'Content-Type': head.contentType,
      [H.nextOffset]: head.nextOffset,
      [H.closed]: head.closed ? 'true' : undefined,
      ...expiryHeaders(head),
      'Cache-Control': 'no-store',
    })
  } catch (error) {
    const response = await refusal(ctx, error, undefined)
    // A HEAD response has no body; keep the status and headers.
    return new Response(null, { status: response.status, headers: response.headers })
  }
}

