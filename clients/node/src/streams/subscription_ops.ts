/**
 * The subscription operations (PROTOCOL.md §6.2-§6.5, §7.1-§7.2), one
 * function per route: read and check the request, call the subscription
 * function, answer. Failures are thrown to the router, which answers them
 * through subscription_refusals.ts. No secret leaves here: subscription views
 * are rebuilt field by field, with the webhook's public signing metadata.
 */
import { bearerToken } from './auth.js'
import { readBody } from './body.js'
import type { HandlerContext } from './context.js'
import { respond } from './context.js'
import { HttpError } from './headers.js'
import type { WebhookSigner } from './signing.js'
import { jsonError, jsonResponse } from './subscription_refusals.js'
import {
  subscriptionAck, subscriptionClaim, subscriptionDelete, subscriptionGet, subscriptionLink, subscriptionPut,
  subscriptionRelease, subscriptionUnlink, type SubscriptionView,
} from './subscriptions_db.js'

/** What the operations share: the handler's context, the signing key, the public stream root. */
export interface SubscriptionContext {
  ctx: HandlerContext
  signer: WebhookSigner
  /** The public URL of the stream root, ending in `/`. */
  streamRoot: () => string
}

/** The request body as text, checked to be a JSON object. */
async function jsonObject(s: SubscriptionContext, request: Request): Promise<{ text: string; value: Record<string, unknown> }> {
  const text = (await readBody(request, s.ctx.options.maxBodyBytes)).toString('utf8')
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new HttpError(400, 'The request body is not valid JSON.')
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new HttpError(400, 'The request body must be a JSON object.')
  return { text, value: value as Record<string, unknown> }
}

const missingToken = () => jsonError(401, 'TOKEN_INVALID', 'Missing or malformed Authorization: Bearer header.')
const staleWake = () => jsonError(409, 'FENCED', 'The wake is stale: a newer generation or wake superseded it.')

/** A subscription as answered to clients: the database's view, with the webhook's signing metadata. */
function present(s: SubscriptionContext, v: SubscriptionView): Record<string, unknown> {
  const webhook = v.webhook === null || v.webhook === undefined ? null : {
    url: v.webhook.url,
    signing: { alg: 'ed25519', kid: s.signer.kid, jwks_url: `${s.streamRoot()}__ds/jwks.json` },
  }
  return {
    id: v.id, subscription_id: v.subscription_id, type: v.type, pattern: v.pattern,
    streams: v.streams.map((l) => ({ path: l.path, link_type: l.link_type, acked_offset: l.acked_offset })),
    webhook, wake_stream: v.wake_stream, lease_ttl_ms: v.lease_ttl_ms, created_at: v.created_at, status: v.status,
    description: v.description,
  }
}

/** PUT: create (201) or re-confirm an identical config (200). */
export async function putSubscription(s: SubscriptionContext, request: Request, id: string): Promise<Response> {
  const { text } = await jsonObject(s, request)
  const result = await subscriptionPut(s.ctx.pool, id, text)
  return jsonResponse(result.created ? 201 : 200, present(s, result.subscription))
}

/** GET: the subscription. */
export async function getSubscription(s: SubscriptionContext, id: string): Promise<Response> {
  return jsonResponse(200, present(s, await subscriptionGet(s.ctx.pool, id)))
}

/** DELETE: tombstone it (204). */
export async function deleteSubscription(s: SubscriptionContext, id: string): Promise<Response> {
  await subscriptionDelete(s.ctx.pool, id)
  return respond(204)
}

/** POST .../streams: link `{ streams: [...] }` explicitly (204). */
export async function linkStreams(s: SubscriptionContext, request: Request, id: string): Promise<Response> {
  const { value } = await jsonObject(s, request)
  const streams = value.streams
  if (!Array.isArray(streams) || streams.length === 0 || !streams.every((p) => typeof p === 'string' && p.length > 0)) {
    return jsonError(400, 'INVALID_REQUEST', 'streams must be a non-empty array of stream paths.')
  }
  await subscriptionLink(s.ctx.pool, id, streams as string[])
  return respond(204)
}

/** DELETE .../streams/:path: drop the explicit link (204, idempotent). */
export async function unlinkStream(s: SubscriptionContext, id: string, path: string): Promise<Response> {
  await subscriptionUnlink(s.ctx.pool, id, path)
  return respond(204)
}

/** POST .../claim: take the pull-wake lease for `{ worker }`. */
export async function claim(s: SubscriptionContext, request: Request, id: string): Promise<Response> {
  const { value } = await jsonObject(s, request)
  if (typeof value.worker !== 'string' || value.worker.length === 0) return jsonError(400, 'INVALID_REQUEST', 'worker must be a non-empty string.')
  const result = await subscriptionClaim(s.ctx.pool, id, value.worker)
  switch (result.outcome) {
    case 'claimed': {
      const { wake_id, generation, token, streams, lease_ttl_ms } = result
      return jsonResponse(200, { wake_id, generation, token, streams, lease_ttl_ms })
    }
    case 'alreadyClaimed':
      return jsonError(409, 'ALREADY_CLAIMED', 'Another worker holds the lease.', { current_holder: result.current_holder, generation: result.generation })
    case 'noPendingWork':
      return jsonError(409, 'NO_PENDING_WORK', 'The subscription has no pending work to claim.')
  }
}

/** POST .../callback (webhook) and .../ack (pull-wake): apply acks, extend or end the lease. */
export async function ack(s: SubscriptionContext, request: Request, id: string): Promise<Response> {
  const token = bearerToken(request)
  if (token === undefined) return missingToken()
  const { text } = await jsonObject(s, request)
  const result = await subscriptionAck(s.ctx.pool, id, token, text)
  switch (result.outcome) {
    case 'ok':
      return jsonResponse(200, { ok: true, next_wake: result.next_wake })
    case 'fenced':
      return staleWake()
    case 'invalidOffset':
      return jsonError(409, 'INVALID_OFFSET', result.message ?? 'An ack offset is not valid for its stream.')
  }
}

/** POST .../release: give the pull-wake lease back without acking (204). */
export async function release(s: SubscriptionContext, request: Request, id: string): Promise<Response> {
  const token = bearerToken(request)
  if (token === undefined) return missingToken()
  const { text } = await jsonObject(s, request)
  const result = await subscriptionRelease(s.ctx.pool, id, token, text)
  if (result.outcome === 'fenced') return staleWake()
  return respond(204)
}

/** GET __ds/jwks.json: the public webhook signing keys (PROTOCOL.md §6.5). */
export function jwks(s: SubscriptionContext): Response {
  return respond(200, { 'Content-Type': 'application/jwk-set+json', 'Cache-Control': 'public, max-age=300' }, JSON.stringify(s.signer.jwks()))
}
