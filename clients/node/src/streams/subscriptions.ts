/**
 * The reserved `__ds` control routes (PROTOCOL.md §6-7) of one handler:
 * parsing a control path, access control, dispatch to subscription_ops.ts,
 * and what the routes and the webhook delivery loop share: the signing key
 * and the public URL of the stream root (`publicUrl`, or else the origin of
 * the most recent request served).
 *
 *   PUT|GET|DELETE  __ds/subscriptions/:id               authorize 'subscribe'
 *   POST            __ds/subscriptions/:id/streams       authorize 'subscribe'
 *   DELETE          __ds/subscriptions/:id/streams/:path authorize 'subscribe'
 *   POST            __ds/subscriptions/:id/claim         authorize 'subscribe'
 *   POST            __ds/subscriptions/:id/{callback,ack,release}  the wake's bearer token only
 *   GET             __ds/jwks.json                       public
 */
import type { KeyObject } from 'node:crypto'
import type { SharedListener } from '../listener.js'
import { withBaseHeaders, type HandlerContext, type StreamOperation } from './context.js'
import { WebhookSigner } from './signing.js'
import type { LookupFunction } from './ssrf.js'
import { jsonError, subscriptionRefusal } from './subscription_refusals.js'
import * as ops from './subscription_ops.js'
import { WebhookDeliveries } from './webhooks.js'

export interface SubscriptionOptions {
  /**
   * The Ed25519 private key webhooks are signed with (a KeyObject or PEM text).
   * Default: a key generated when the handler is made, so it changes at every
   * restart and differs between processes; replicas behind one URL must share
   * one key, and a key should persist across restarts (receivers cache the JWKS).
   */
  signingKey?: KeyObject | string
  /**
   * Public URL of this server (e.g. `https://streams.example.com`, or with the path
   * prefix a proxy strips), the base of `callback_url` (`<publicUrl><basePath>__ds/
   * subscriptions/<id>/callback`) and `jwks_url`. Default: the origin of the most recent
   * request `authorize` let through (its Host header; any request when there is no
   * `authorize`), so set it in production, behind a proxy above all. Without it no
   * webhook is delivered before the first such request.
   */
  publicUrl?: string
  /**
   * Run the delivery loop in this process (default true): it sends the webhooks and
   * also expires lapsed leases (webhook and pull-wake), so at least one process
   * serving the database must run it. false serves the routes only.
   */
  webhooks?: boolean
  /** Deadline of one webhook request (default 10000 ms); past it the delivery failed. */
  deliveryTimeoutMs?: number
  /** Webhook requests in flight at once (default 8). */
  maxConcurrentDeliveries?: number
  /** How webhook hosts are resolved (dns.lookup-compatible; default node:dns). Every address is checked. */
  lookup?: LookupFunction
}

type Authorize = ((request: Request, context: { path: string; operation: StreamOperation }) => unknown) | undefined

type ControlRoute =
  | { kind: 'jwks' }
  | { kind: 'subscription' | 'streams' | 'callback' | 'claim' | 'ack' | 'release'; id: string }
  | { kind: 'stream'; id: string; path: string }

const ACTIONS = new Set(['streams', 'callback', 'claim', 'ack', 'release'])
const METHODS: Record<ControlRoute['kind'], string> = {
  jwks: 'GET', subscription: 'GET, PUT, DELETE', streams: 'POST', stream: 'DELETE', callback: 'POST', claim: 'POST', ack: 'POST', release: 'POST',
}

/** A control path (after the base path, still percent-encoded) as a route; undefined: no such route. Throws URIError. */
export function parseControlPath(raw: string): ControlRoute | undefined {
  const seg = raw.split('/').map(decodeURIComponent)
  if (seg[0] !== '__ds') return undefined
  if (seg.length === 2 && seg[1] === 'jwks.json') return { kind: 'jwks' }
  const id = seg[2]
  if (seg[1] !== 'subscriptions' || id === undefined || id === '') return undefined
  if (seg.length === 3) return { kind: 'subscription', id }
  const action = seg[3]!
  if (seg.length === 4 && ACTIONS.has(action)) return { kind: action as 'streams', id }
  const path = seg.slice(4).join('/')
  if (action === 'streams' && path !== '') return { kind: 'stream', id, path }
  return undefined
}

/** `publicUrl` checked (an absolute http(s) URL) and without its trailing slashes. */
function publicBase(publicUrl: string): string {
  const url = new URL(publicUrl)
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new TypeError(`subscriptions.publicUrl must be an http(s) URL, got ${publicUrl}.`)
  return `${url.origin}${url.pathname}`.replace(/\/+$/, '')
}

export class Subscriptions {
  private readonly publicUrl: string | undefined
  private lastOrigin: string | undefined
  private readonly deliveries: WebhookDeliveries | undefined
  private readonly s: ops.SubscriptionContext

  constructor(private readonly ctx: HandlerContext, listener: SharedListener, fallbackPollMs: number, options: SubscriptionOptions) {
    this.publicUrl = options.publicUrl === undefined ? undefined : publicBase(options.publicUrl)
    const signer = new WebhookSigner(options.signingKey)
    this.s = { ctx, signer, streamRoot: () => this.streamRoot()! }
    if (options.webhooks === false) return
    this.deliveries = new WebhookDeliveries({
      pool: ctx.pool, listener, signer, logger: ctx.options.logger, fallbackPollMs, lookup: options.lookup,
      streamRoot: () => this.streamRoot(),
      timeoutMs: options.deliveryTimeoutMs ?? 10_000,
      maxInFlight: Math.max(1, options.maxConcurrentDeliveries ?? 8),
      maxIdleMs: 30_000,
    })
    this.deliveries.start()
  }

  /** The public URL of the stream root (`publicUrl` or the last request's origin, then the base path). */
  streamRoot(): string | undefined {
    const origin = this.publicUrl ?? this.lastOrigin
    return origin === undefined ? undefined : `${origin}${this.ctx.options.basePath}`
  }

  /** Note a request's origin (the public URL when none is configured); the first one starts deliveries. */
  observe(url: URL): void {
    if (this.publicUrl !== undefined || this.lastOrigin === url.origin) return
    const first = this.lastOrigin === undefined
    this.lastOrigin = url.origin
    if (first) this.deliveries?.kick()
  }

  /**
   * Answer a request for a control path (`raw`: after the base path, still
   * encoded). Its origin is observed only once `authorize` let it through:
   * the callback, ack, release and JWKS routes, open to anyone holding a wake
   * token or to everyone, never set where callback URLs point.
   */
  async route(request: Request, url: URL, raw: string, authorize: Authorize): Promise<Response> {
    let route
    try {
      route = parseControlPath(raw)
    } catch {
      return jsonError(400, 'INVALID_REQUEST', 'The path is not valid percent-encoding.')
    }
    if (route === undefined) return jsonError(404, 'NOT_FOUND', 'No such Durable Streams control route.')
    const allowed = METHODS[route.kind]
    if (!allowed.split(', ').includes(request.method)) {
      return jsonError(405, 'METHOD_NOT_ALLOWED', `Method ${request.method} is not allowed here.`, {}, { Allow: `${allowed}, OPTIONS` })
    }
    if (route.kind === 'jwks') return ops.jwks(this.s)
    if (route.kind !== 'callback' && route.kind !== 'ack' && route.kind !== 'release') {
      if (authorize !== undefined) {
        const verdict = await authorize(request, { path: `__ds/subscriptions/${route.id}`, operation: 'subscribe' })
        if (verdict instanceof Response) return withBaseHeaders(verdict)
        if (verdict !== true) return jsonError(401, 'TOKEN_INVALID', 'Unauthorized.')
      }
      this.observe(url)
    }
    try {
      return await this.dispatch(request, route)
    } catch (error) {
      return subscriptionRefusal(this.ctx, error)
    }
  }

  private dispatch(request: Request, route: Exclude<ControlRoute, { kind: 'jwks' }>): Promise<Response> {
    const s = this.s
    switch (route.kind) {
      case 'subscription':
        if (request.method === 'PUT') return ops.putSubscription(s, request, route.id)
        return request.method === 'GET' ? ops.getSubscription(s, route.id) : ops.deleteSubscription(s, route.id)
      case 'streams':
        return ops.linkStreams(s, request, route.id)
      case 'stream':
        return ops.unlinkStream(s, route.id, route.path)
      case 'claim':
        return ops.claim(s, request, route.id)
      case 'callback':
      case 'ack':
        return ops.ack(s, request, route.id)
      case 'release':
        return ops.release(s, request, route.id)
    }
  }

  /** Stop the delivery loop and wait for the deliveries in flight. */
  async close(): Promise<void> {
    await this.deliveries?.close()
  }
}
