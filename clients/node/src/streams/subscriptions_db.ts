/**
 * The subscription functions of the extension (PROTOCOL.md §6-7), one
 * statement each. Results are the functions' JSON, in the protocol's
 * snake_case; errors are node-postgres errors carrying the SQLSTATE in `code`.
 */
import { SP, type Queryable } from '../internal.js'

/** One linked stream of a subscription. */
export interface SubscriptionLink {
  path: string
  link_type: 'glob' | 'explicit'
  acked_offset: string
}

/** A linked stream in a wake: its cursor and the tail it was woken for. */
export interface WakeStream extends SubscriptionLink {
  tail_offset: string
  has_pending: boolean
}

/** A subscription as the database serializes it (PROTOCOL.md §6.3), without signing metadata. */
export interface SubscriptionView {
  id: string
  subscription_id: string
  type: 'webhook' | 'pull-wake'
  pattern: string | null
  streams: SubscriptionLink[]
  webhook: { url: string } | null
  wake_stream: string | null
  lease_ttl_ms: number
  created_at: string
  status: 'active' | 'failed'
  description: string | null
}

export type ClaimResult =
  | { outcome: 'claimed'; wake_id: string; generation: number; token: string; streams: WakeStream[]; lease_ttl_ms: number }
  | { outcome: 'alreadyClaimed'; current_holder: string; generation: number }
  | { outcome: 'noPendingWork' }

export type AckResult =
  | { outcome: 'ok'; next_wake: boolean }
  | { outcome: 'fenced' }
  | { outcome: 'invalidOffset'; message?: string }

export type ReleaseResult = { outcome: 'released' } | { outcome: 'fenced' }

/** A webhook wake due now, taken by this process. */
export interface Delivery {
  subscription_id: string
  url: string
  wake_id: string
  generation: number
  callback_token: string
  streams: WakeStream[]
}

export interface DeliveryBatch {
  deliveries: Delivery[]
  /** Epoch ms when the next delivery or lease expiry falls due; null: nothing scheduled. */
  next_due_at: number | null
}

export interface DeliveredResult {
  outcome: 'acked' | 'awaitingCallback' | 'retry' | 'fenced'
  next_wake?: boolean
}

async function one<T>(db: Queryable, text: string, values: unknown[]): Promise<T> {
  const result = await db.query(text, values)
  return (result.rows[0] as { r: T }).r
}

/** stream_subscription_put: create, or re-confirm with an identical config. */
export function subscriptionPut(db: Queryable, id: string, config: string): Promise<{ created: boolean; subscription: SubscriptionView }> {
  return one(db, `SELECT ${SP}.stream_subscription_put($1::text, $2::json) AS r`, [id, config])
}

/** stream_subscription_get: the subscription (SP709 when absent). */
export function subscriptionGet(db: Queryable, id: string): Promise<SubscriptionView> {
  return one(db, `SELECT ${SP}.stream_subscription_get($1::text) AS r`, [id])
}

/** stream_subscription_delete: tombstone it (SP709 when absent). */
export function subscriptionDelete(db: Queryable, id: string): Promise<{ deleted: true }> {
  return one(db, `SELECT ${SP}.stream_subscription_delete($1::text) AS r`, [id])
}

/** stream_subscription_link: add explicit stream links, at each stream's tail. */
export function subscriptionLink(db: Queryable, id: string, streams: string[]): Promise<{ linked: number }> {
  return one(db, `SELECT ${SP}.stream_subscription_link($1::text, $2::text[]) AS r`, [id, streams])
}

/** stream_subscription_unlink: remove one explicit link (idempotent). */
export function subscriptionUnlink(db: Queryable, id: string, path: string): Promise<{ unlinked: boolean }> {
  return one(db, `SELECT ${SP}.stream_subscription_unlink($1::text, $2::text) AS r`, [id, path])
}

/** stream_subscription_claim: take the pull-wake lease for `worker`. */
export function subscriptionClaim(db: Queryable, id: string, worker: string): Promise<ClaimResult> {
  return one(db, `SELECT ${SP}.stream_subscription_claim($1::text, $2::text) AS r`, [id, worker])
}

/** stream_subscription_ack: a webhook callback or a pull-wake ack (heartbeat without done). */
export function subscriptionAck(db: Queryable, id: string, token: string, request: string): Promise<AckResult> {
  return one(db, `SELECT ${SP}.stream_subscription_ack($1::text, $2::text, $3::json) AS r`, [id, token, request])
}

/** stream_subscription_release: give a pull-wake lease back without acking. */
export function subscriptionRelease(db: Queryable, id: string, token: string, request: string): Promise<ReleaseResult> {
  return one(db, `SELECT ${SP}.stream_subscription_release($1::text, $2::text, $3::json) AS r`, [id, token, request])
}

/** stream_subscription_deliveries: take up to `maxRows` webhook deliveries due now (and expire lapsed leases). */
export function subscriptionDeliveries(db: Queryable, maxRows: number): Promise<DeliveryBatch> {
  return one(db, `SELECT ${SP}.stream_subscription_deliveries($1::integer) AS r`, [maxRows])
}

/** stream_subscription_delivered: record how a delivery went (`done`: the receiver answered `{done: true}`). */
export function subscriptionDelivered(
  db: Queryable, id: string, wakeId: string, generation: number, result: { ok: boolean; done: boolean },
): Promise<DeliveredResult> {
  return one(db, `SELECT ${SP}.stream_subscription_delivered($1::text, $2::text, $3::bigint, $4::json) AS r`, [
    id, wakeId, generation, JSON.stringify(result),
  ])
}
