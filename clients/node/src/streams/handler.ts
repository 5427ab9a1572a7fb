/**
 * `createStreamHandler(options)`: the Durable Streams protocol (PROTOCOL.md)
 * as a fetch-style `(Request) => Promise<Response>` over the extension's
 * stream functions (docs/contract/streams.md §6). This file routes; the
 * operations live in write.ts, read.ts and sse.ts, the reserved `__ds`
 * subscription routes and webhook delivery in subscriptions.ts.
 */
import type pg from 'pg'
import { acquireListener, type ListenerHealth, type ListenerOptions } from '../listener.js'
import type { SandboxPersistLogger } from '../log.js'
import { baseHeaders, errorResponse, withBaseHeaders, type AuthorizeResult, type HandlerContext, type ResolvedOptions, type StreamOperation } from './context.js'
import { parseReadQuery, REQUEST_HEADERS } from './headers.js'
import { handleCatchUp, handleLongPoll } from './read.js'
import { refusal } from './refusals.js'
import { handleSse } from './sse.js'
import { Subscriptions, type SubscriptionOptions } from './subscriptions.js'
import { StreamWaiters } from './waiters.js'
import { handleAppend, handleCreate, handleDelete, handleHead } from './write.js'

export type { AuthorizeResult, StreamOperation, SubscriptionOptions }


export interface StreamHandlerOptions {
  /** The pool the stream functions run on. */
  pool: pg.Pool
  /** Where the shared LISTEN connection comes from (the adapter's listener machinery); default: the PG* environment. */
  listener?: ListenerOptions
  /** URL prefix of every stream (default `/v1/stream/`). */
  basePath?: string
  /**
   * Access control, called before every stream operation, and before every
   * subscription route with operation 'subscribe' and path `__ds/subscriptions/<id>`
   * (create, read, delete, link, unlink, claim). A webhook callback, a pull-wake
   * ack and a release are authorized by their wake's bearer token alone (the
   * database checks it), and `__ds/jwks.json` is public: `authorize` is not called.
   */
  authorize?: (request: Request, context: { path: string; operation: StreamOperation }) => AuthorizeResult | Promise<AuthorizeResult>
  /** How long a long-poll waits for data before answering 204 (default 20000 ms). */
  longPollTimeoutMs?: number
  /** How long an SSE connection stays open before the server ends it (default 60000 ms, PROTOCOL.md §10.2). */
  sseLifetimeMs?: number
  /** Idle time after which an SSE connection gets a comment line (default 15000 ms). */
  sseHeartbeatMs?: number
  /** Largest request body accepted; larger ones get 413 (default 16 MiB). */
  maxBodyBytes?: number
  /** Bytes a read returns at most (whole entries, at least one; default 1 MiB). */
  maxReadBytes?: number
  /** Long-poll and SSE readers served at once; past it 503 with Retry-After (default 10000). */
  maxLiveReaders?: number
  /** Retry-After seconds of that 503 (default 5). */
  retryAfterSeconds?: number
  /** How often live readers re-read while the LISTEN connection is down (default 1000 ms). */
  fallbackPollMs?: number
  /**
   * Paths under these prefixes are fenced stream-wide: an idempotent append raises the
   * stream's fence to its Producer-Epoch, and a producer below the fence gets 403 with
   * the fence as Producer-Epoch, whatever its Producer-Id (docs/contract/streams.md §4).
   * Default `['runs/']`: TanStack's `durableStream` writes a run at `runs/<runId>` from
   * each host with a fresh Producer-Id and the run's driver epoch. `[]` turns it off.
   */
  streamFencePrefixes?: string[]
  /** Where unexpected failures (answered 500) and an unreachable database (503) are reported. */
  logger?: SandboxPersistLogger
  /**
   * Serve the reserved subscription APIs (PROTOCOL.md §6-7: webhook and pull-wake
   * subscriptions under `__ds/`) and deliver webhooks from this process: `true` with
   * the defaults, or the options. Default off: `__ds/` paths answer 404.
   */
  subscriptions?: boolean | SubscriptionOptions
}

export interface StreamHandler {
  (request: Request): Promise<Response>
  /**
   * Answer every waiting long-poll (204), end every SSE stream, refuse new requests (503),
   * stop the webhook delivery loop and wait for its deliveries in flight, and release the listener.
   */
  close(): Promise<void>
  /** Long-poll and SSE readers being served now. */
  readonly liveReaders: number
  /** Whether the LISTEN connection wakes live readers now (`ok: false` with the reason while they poll). */
  health(): Promise<ListenerHealth>
}

function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`${name} must be a non-negative number, got ${value}.`)
  return value
}

/** A list option of path prefixes: each a non-empty string. */
function prefixes(name: string, value: string[] | undefined, fallback: string[]): string[] {
  if (value === undefined) return fallback
  if (!Array.isArray(value) || value.some((p) => typeof p !== 'string' || p.length === 0)) {
    throw new TypeError(`${name} must be an array of non-empty strings.`)
  }
  return [...value]
}

function resolve(options: StreamHandlerOptions): ResolvedOptions {
  let basePath = options.basePath ?? '/v1/stream/'
  if (!basePath.startsWith('/')) basePath = `/${basePath}`
  if (!basePath.endsWith('/')) basePath = `${basePath}/`
  return {
    basePath,
    longPollTimeoutMs: positive('longPollTimeoutMs', options.longPollTimeoutMs, 20_000),
    sseLifetimeMs: positive('sseLifetimeMs', options.sseLifetimeMs, 60_000),
    sseHeartbeatMs: Math.max(100, positive('sseHeartbeatMs', options.sseHeartbeatMs, 15_000)),
    maxBodyBytes: positive('maxBodyBytes', options.maxBodyBytes, 16 * 1024 * 1024),
    maxReadBytes: Math.max(1, Math.floor(positive('maxReadBytes', options.maxReadBytes, 1024 * 1024))),
    maxLiveReaders: positive('maxLiveReaders', options.maxLiveReaders, 10_000),
    retryAfterSeconds: Math.ceil(positive('retryAfterSeconds', options.retryAfterSeconds, 5)),
    streamFencePrefixes: prefixes('streamFencePrefixes', options.streamFencePrefixes, ['runs/']),
    logger: options.logger,
  }
}

const OPERATION: Record<string, Exclude<StreamOperation, 'subscribe'>> = { PUT: 'create', POST: 'append', GET: 'read', HEAD: 'head', DELETE: 'delete' }

export function createStreamHandler(options: StreamHandlerOptions): StreamHandler {
  const resolved = resolve(options)
  const fallbackPollMs = positive('fallbackPollMs', options.fallbackPollMs, 1000)
  const handle = acquireListener(options.pool, { ...options.listener, logger: options.listener?.logger ?? options.logger })
  const ctx: HandlerContext = {
    pool: options.pool,
    options: resolved,
    waiters: new StreamWaiters(handle.listener, fallbackPollMs),
    live: { count: 0 },
    shutdown: new AbortController(),
  }
  let subscriptions: Subscriptions | undefined
  try {
    const given = options.subscriptions
    if (given !== undefined && given !== false) subscriptions = new Subscriptions(ctx, handle.listener, fallbackPollMs, given === true ? {} : given)
  } catch (error) {
    void handle.release() // a bad signingKey or publicUrl: give the listener share back
    throw error
  }
  /** A stream path from a URL path (or a Stream-Forked-From value): the part after the base path, decoded. */
  const toStreamPath = (p: string): string => {
    const rest = p.startsWith(resolved.basePath) ? p.slice(resolved.basePath.length) : p.replace(/^\/+/, '')
    return decodeURIComponent(rest)
  }

  const handler = async (request: Request): Promise<Response> => {
    try {
      return await route(request)
    } catch (error) {
      return refusal(ctx, error, undefined)
    }
  }

  async function route(request: Request): Promise<Response> {
    const url = new URL(request.url)
    if (request.method === 'OPTIONS') return preflight()
    if (!url.pathname.startsWith(resolved.basePath)) return errorResponse(404, 'Not a stream URL.')
    let path: string
    try {
      path = toStreamPath(url.pathname)
    } catch {
      return errorResponse(400, 'The stream path is not valid percent-encoding.')
    }
    if (path === '') return errorResponse(404, 'No stream named.')
    if (path === '__ds' || path.startsWith('__ds/')) return control(request, url)
    const operation = OPERATION[request.method]
    if (operation === undefined) return errorResponse(405, `Method ${request.method} is not allowed.`, { Allow: 'GET, HEAD, POST, PUT, DELETE, OPTIONS' })
    if (ctx.shutdown.signal.aborted) return shuttingDown()
    if (options.authorize !== undefined) {
      const verdict = await options.authorize(request, { path, operation })
      if (verdict instanceof Response) return withBaseHeaders(verdict)
      if (verdict !== true) return errorResponse(401, 'Unauthorized.', { 'WWW-Authenticate': 'Bearer' })
    }
    // Only an authorized request may lend its origin to callback URLs (a forged Host would steer them).
    subscriptions?.observe(url)
    switch (operation) {
      case 'create':
        return handleCreate(ctx, request, path, toStreamPath)
      case 'append':
        return handleAppend(ctx, request, path)
      case 'delete':
        return handleDelete(ctx, path)
      case 'head':
        return handleHead(ctx, path)
      case 'read':
        return read(request, url, path)
    }
  }

  /** A reserved `__ds` path (PROTOCOL.md §6): the subscription routes, or 404 when they are off. */
  async function control(request: Request, url: URL): Promise<Response> {
    if (subscriptions === undefined) return errorResponse(404, 'Subscriptions are not enabled on this server.')
    if (ctx.shutdown.signal.aborted) return shuttingDown()
    return subscriptions.route(request, url, url.pathname.slice(resolved.basePath.length), options.authorize)
  }

  const shuttingDown = () => errorResponse(503, 'The server is shutting down.', { 'Retry-After': String(resolved.retryAfterSeconds) })

  async function read(request: Request, url: URL, path: string): Promise<Response> {
    let query
    try {
      query = parseReadQuery(url.searchParams)
    } catch (error) {
      return refusal(ctx, error, path)
    }
    if (query.live === 'sse') return handleSse(ctx, request, path, query)
    if (query.live === 'long-poll') return handleLongPoll(ctx, request, path, query)
    return handleCatchUp(ctx, request, path, query)
  }

  let closing: Promise<void> | undefined
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      ctx.shutdown.abort()
      ctx.waiters.shutdownAll()
      await subscriptions?.close()
      await handle.release()
    })())

  return Object.defineProperties(handler, {
    close: { value: close },
    health: { value: () => handle.health() },
    liveReaders: { get: () => ctx.live.count },
  }) as StreamHandler
}

function preflight(): Response {
  const headers = baseHeaders()
  headers.set('Access-Control-Allow-Methods', 'GET, HEAD, POST, PUT, DELETE, OPTIONS')
  headers.set('Access-Control-Allow-Headers', REQUEST_HEADERS.join(', '))
  headers.set('Access-Control-Max-Age', '86400')
  return new Response(null, { status: 204, headers })
}
