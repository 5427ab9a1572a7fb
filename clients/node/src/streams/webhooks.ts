/**
 * The webhook delivery loop of one handler (PROTOCOL.md §7.1). It asks the
 * database for the deliveries due now (stream_subscription_deliveries, which
 * hands each one to one process: several servers share the work) when
 * `sandbox_persist_subscription` is notified, when the listener (re)connects,
 * once at start, and on a timer set to the next due time the database
 * reports (capped; never a busy poll). Each delivery is signed and POSTed
 * (webhook_post.ts), then its outcome recorded (stream_subscription_delivered,
 * which schedules retries). At most `maxInFlight` deliveries run at once;
 * `close()` stops asking and waits for those in flight. Failures are reported,
 * never thrown.
 */
import { SUBSCRIPTION_CHANNEL, type SharedListener } from '../listener.js'
import { report, type SandboxPersistLogger } from '../log.js'
import type { Queryable } from '../internal.js'
import { isDatabaseError } from '../errors.js'
import type { WebhookSigner } from './signing.js'
import type { LookupFunction } from './ssrf.js'
import { subscriptionDelivered, subscriptionDeliveries, type Delivery } from './subscriptions_db.js'
import { postWebhook } from './webhook_post.js'

/** `<root>__ds/subscriptions/<id>[/<action>]`: a control URL under the public stream root. */
export function subscriptionUrl(root: string, id: string, action?: string): string {
  return `${root}__ds/subscriptions/${encodeURIComponent(id)}${action === undefined ? '' : `/${action}`}`
}

export interface WebhookDeliveryOptions {
  pool: Queryable
  listener: SharedListener
  signer: WebhookSigner
  /** The public URL of the stream root (ends in `/`), or undefined while it is not known yet. */
  streamRoot: () => string | undefined
  logger: SandboxPersistLogger | undefined
  timeoutMs: number
  maxInFlight: number
  /** Longest wait between two asks while the listener is up (and, down, `fallbackPollMs`). */
  maxIdleMs: number
  fallbackPollMs: number
  lookup?: LookupFunction | undefined
}

/** A wait after a round that saw something due but was handed nothing (another process has it). */
const BUSY_ELSEWHERE_MS = 1000

export class WebhookDeliveries {
  private readonly inFlight = new Set<Promise<void>>()
  private pumping: Promise<void> | undefined
  private again = false
  private closed = false
  private timer: ReturnType<typeof setTimeout> | undefined
  /** The last ask failed: further failures are not reported again until one succeeds (an outage is one report). */
  private failing = false
  private unsubscribe: (() => void) | undefined

  constructor(private readonly o: WebhookDeliveryOptions) {}

  /** Listen for wakes and ask once now. */
  start(): void {
    this.unsubscribe = this.o.listener.subscribe(SUBSCRIPTION_CHANNEL, () => this.kick())
    void this.o.listener.ready()
    this.kick()
  }

  /** Ask the database for due deliveries now (coalesced with a round under way). */
  kick(): void {
    if (this.closed) return
    if (this.pumping !== undefined) {
      this.again = true
      return
    }
    this.pumping = this.pump().finally(() => {
      this.pumping = undefined
    })
  }

  /** Stop asking and wait for the deliveries in flight (each bounded by its timeout). */
  async close(): Promise<void> {
    this.closed = true
    this.unsubscribe?.()
    clearTimeout(this.timer)
    await this.pumping // a round under way may still hand out deliveries: they are sent
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight])
  }

  /** Rounds until nothing more is due now or every slot is busy (a finishing delivery asks again). */
  private async pump(): Promise<void> {
    do {
      this.again = false
      const room = this.o.maxInFlight - this.inFlight.size
      if (room <= 0 || this.closed) return
      if (this.o.streamRoot() === undefined) return // no public URL yet: the first request kicks
      let batch
      try {
        batch = await subscriptionDeliveries(this.o.pool, room)
      } catch (error) {
        if (!this.failing) this.report('subscriptions.delivery_failed', `asking for due webhook deliveries failed: ${(error as Error).message}`, { error })
        this.failing = true
        this.schedule(null, true)
        return
      }
      this.failing = false
      for (const delivery of batch.deliveries) this.track(this.deliver(delivery))
      this.schedule(batch.next_due_at, batch.deliveries.length === 0)
      if (batch.deliveries.length === room) this.again = true
    } while (this.again && !this.closed)
  }

  /** Arm the timer for `dueAt` (epoch ms), at most the idle cap away; 1 s when due but handed nothing. */
  private schedule(dueAt: number | null, gotNothing: boolean): void {
    if (this.closed) return
    clearTimeout(this.timer)
    const cap = this.o.listener.connected ? this.o.maxIdleMs : Math.min(this.o.maxIdleMs, this.o.fallbackPollMs)
    let ms = dueAt === null ? cap : Number(dueAt) - Date.now()
    if (ms <= 0 && gotNothing) ms = BUSY_ELSEWHERE_MS
    this.timer = setTimeout(() => this.kick(), Math.min(cap, Math.max(0, ms)))
    this.timer.unref?.()
  }

  private track(delivery: Promise<void>): void {
    const p = delivery.catch((error: unknown) => {
      this.report('subscriptions.delivery_failed', `a webhook delivery failed: ${(error as Error).message}`, { error })
    })
    this.inFlight.add(p)
    void p.finally(() => {
      this.inFlight.delete(p)
      this.kick()
    })
  }

  /** POST one wake and record the outcome; a refused or failed request counts as a failed delivery. */
  private async deliver(d: Delivery): Promise<void> {
    const callbackUrl = subscriptionUrl(this.o.streamRoot()!, d.subscription_id, 'callback')
    const body = Buffer.from(JSON.stringify({
      subscription_id: d.subscription_id, wake_id: d.wake_id, generation: d.generation, streams: d.streams,
      callback_url: callbackUrl, callback_token: d.callback_token,
    }))
    const headers = { 'Content-Type': 'application/json', 'Webhook-Signature': this.o.signer.signatureHeader(body) }
    let result = { ok: false, done: false }
    try {
      const answer = await postWebhook(d.url, body, headers, { timeoutMs: this.o.timeoutMs, lookup: this.o.lookup })
      result = { ok: answer.ok, done: answer.done }
      if (!answer.ok) this.failed(d, `it answered ${answer.status}`)
    } catch (error) {
      const refused = (error as Error).name === 'WebhookRefusedError'
      if (refused) this.report('subscriptions.webhook_refused', (error as Error).message, { subscriptionId: d.subscription_id })
      else this.failed(d, (error as Error).message, error)
    }
    try {
      await subscriptionDelivered(this.o.pool, d.subscription_id, d.wake_id, d.generation, result)
    } catch (error) {
      // Deleted while its wake was out: nothing is left to record.
      if (isDatabaseError(error) && error.code === 'SP709') return
      this.report('subscriptions.delivery_failed', `recording a webhook delivery failed: ${(error as Error).message}`, {
        error, subscriptionId: d.subscription_id, wakeId: d.wake_id,
      })
    }
  }

  private failed(d: Delivery, why: string, error?: unknown): void {
    this.report('subscriptions.webhook_failed', `webhook delivery of subscription ${d.subscription_id} failed (retried with backoff): ${why}`, {
      error, subscriptionId: d.subscription_id, wakeId: d.wake_id, generation: d.generation,
    })
  }

  private report(event: Parameters<typeof report>[1], message: string, fields: Record<string, unknown>): void {
    report([this.o.logger], event, message, fields)
  }
}
