/**
 * SSE comment heartbeats for a streaming `Response`.
 *
 * A parked resumer (or a producer whose model is thinking) sends no bytes until
 * the next chunk, and proxies with an idle timeout (often 60 s) cut such a
 * connection. `sseHeartbeats(response)` returns the same response whose body
 * also carries a comment line (`: heartbeat`) whenever nothing was sent for
 * `intervalMs`. Comments are ignored by every SSE parser (EventSource and
 * TanStack AI's client alike) and carry no `id:`, so resume offsets are
 * untouched. A comment is only ever sent between two events, never inside one.
 */
import { checkNumberOption } from './internal.js'

/** The default heartbeat interval, in ms: below the common 30 s and 60 s proxy idle timeouts. */
export const DEFAULT_HEARTBEAT_MS = 15_000

export interface SseHeartbeatOptions {
  /** Send a comment after this many ms without bytes (default 15000). */
  intervalMs?: number
  /** The comment's text (default `heartbeat`; no CR or LF). */
  comment?: string
}

/**
 * The response with heartbeats added to its body (status and headers kept). A
 * response without a body, or one that is not `text/event-stream` (a 400 from
 * `resumeServerSentEventsResponse`, an error page), is returned as is.
 * Cancelling the returned body cancels the original one.
 */
export function sseHeartbeats(response: Response, options: SseHeartbeatOptions = {}): Response {
  const intervalMs = checkNumberOption(
    options.intervalMs ?? DEFAULT_HEARTBEAT_MS,
    'intervalMs',
    (n) => Number.isFinite(n) && n > 0,
    `intervalMs must be > 0, got ${options.intervalMs}.`,
  )
  const comment = options.comment ?? 'heartbeat'
  if (typeof comment !== 'string' || /[\r\n]/.test(comment)) {
    throw new TypeError('comment must be a string without CR or LF.')
  }
  const type = response.headers.get('content-type') ?? ''
  if (response.body === null || !type.startsWith('text/event-stream')) return response
  const beat = new TextEncoder().encode(`: ${comment}\n\n`)
  const reader = response.body.getReader()
  let pending: ReturnType<typeof reader.read> | undefined
  // A comment may only go between events: after bytes that end with a blank line.
  let atBoundary = true
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        pending ??= reader.read()
        let timer: ReturnType<typeof setTimeout> | undefined
        const tick = new Promise<'tick'>((resolve) => {
          timer = setTimeout(() => resolve('tick'), intervalMs)
        })
        const result = await Promise.race([pending, tick])
        clearTimeout(timer)
        if (result === 'tick') {
          if (!atBoundary) continue
          controller.enqueue(beat)
          return
        }
        pending = undefined
        if (result.done) {
          controller.close()
          return
        }
        const bytes = result.value
        if (bytes.byteLength > 0) {
          atBoundary = bytes.byteLength >= 2 && bytes[bytes.byteLength - 1] === 10 && bytes[bytes.byteLength - 2] === 10
        }
        controller.enqueue(bytes)
        return
      }
    },
    cancel(reason) {
      return reader.cancel(reason)
    },
  })
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers })
}
