/**
 * What the parts of the stream handler share: the resolved options, the
 * pool, the live-reader registry and the response builders that put the
 * security and CORS headers on every response.
 */
import type { Queryable } from '../internal.js'
import type { SandboxPersistLogger } from '../log.js'
import { EXPOSED_HEADERS } from './headers.js'
import type { StreamWaiters } from './waiters.js'

/**
 * What a request wants to do, for `authorize`: a stream operation, or
 * 'subscribe' for the subscription control routes (PROTOCOL.md §6-7: create,
 * read, delete, link, unlink, claim; `path` is `__ds/subscriptions/<id>`).
 */
export type StreamOperation = 'create' | 'append' | 'read' | 'head' | 'delete' | 'subscribe'

/** What `authorize` answers: true lets the request through, false is a 401, a Response is sent as is. */
export type AuthorizeResult = boolean | Response

export interface ResolvedOptions {
  basePath: string
  longPollTimeoutMs: number
  sseLifetimeMs: number
  sseHeartbeatMs: number
  maxBodyBytes: number
  maxReadBytes: number
  maxLiveReaders: number
  retryAfterSeconds: number
  streamFencePrefixes: string[]
  logger: SandboxPersistLogger | undefined
}

export interface HandlerContext {
  pool: Queryable
  options: ResolvedOptions
  waiters: StreamWaiters
  /** Live readers now being served (long-poll and SSE); `maxLiveReaders` bounds it. */
  live: { count: number }
  /** Aborted by `close()`: SSE streams end, long-polls answer 204. */
  shutdown: AbortController
}

/** Headers on every response (PROTOCOL.md §12.7 and CORS). */
export function baseHeaders(): Headers {
  return new Headers({
    'X-Content-Type-Options': 'nosniff',
    'Cross-Origin-Resource-Policy': 'cross-origin',
    'Access-Control-Allow-Origin': '*',
    'Access-Control-Expose-Headers': EXPOSED_HEADERS.join(', '),
  })
}

/** A response with the base headers plus `headers`. */
export function respond(
  status: number,
  headers: Record<string, string | undefined> = {},
  body: ConstructorParameters<typeof Response>[0] = null,
): Response {
  const all = baseHeaders()
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) all.set(k, v)
  return new Response(status === 204 || status === 304 ? null : body, { status, headers: all })
}

/** A plain-text error response (the status is what clients act on, never the text). */
export function errorResponse(status: number, message: string, headers: Record<string, string | undefined> = {}): Response {
  return respond(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store', ...headers }, message)
}

/** An `authorize` Response, with the headers every response carries. */
export function withBaseHeaders(response: Response): Response {
  const headers = new Headers(response.headers)
  for (const [k, v] of baseHeaders()) if (!headers.has(k)) headers.set(k, v)
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers })
}

/** Cache-Control for catch-up and long-poll data (PROTOCOL.md §10.1): private once the request carries credentials. */
export function cacheableFor(request: Request): string {
  const scope = request.headers.has('authorization') ? 'private' : 'public'
  return `${scope}, max-age=60, stale-while-revalidate=300`
}
