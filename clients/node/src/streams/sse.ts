/**
 * GET ?live=sse (PROTOCOL.md §5.8): `event: data` with the read's bytes
 * (text as `data:` lines, split at every line break so stream content can
 * never frame an event; base64 for non-text types), an `event: control`
 * after every data event, a heartbeat comment while idle, and the
 * connection ended after `sseLifetimeMs`, at the end of a closed stream,
 * on client disconnect or on `close()`.
 */
import { respond, type HandlerContext } from './context.js'
import { nextCursor } from './cursor.js'
import { streamRead, type ReadMeta } from './db.js'
import { H, isTextType, type ReadQuery } from './headers.js'
import { hasData, readBody, tooManyReaders } from './read.js'
import { refusal } from './refusals.js'
import type { StreamFollower } from './waiters.js'

const BASE64_LINE = 8192

export function dataEvent(body: Buffer, base64: boolean): string {
  let lines: string[]
  if (base64) {
    const text = body.toString('base64')
    lines = []
    for (let i = 0; i < text.length; i += BASE64_LINE) lines.push(text.slice(i, i + BASE64_LINE))
    if (lines.length === 0) lines.push('')
  } else {
    lines = body.toString('utf8').split(/\r\n|\r|\n/)
  }
  return `event: data\n${lines.map((l) => `data:${l}\n`).join('')}\n`
}

export function controlEvent(meta: ReadMeta, cursor: string): string {
  const control: Record<string, unknown> = { streamNextOffset: meta.nextOffset }
  if (!meta.closed) control.streamCursor = cursor
  if (meta.upToDate || meta.closed) control.upToDate = true
  if (meta.closed) control.streamClosed = true
  return `event: control\ndata:${JSON.stringify(control)}\n\n`
}

export async function handleSse(ctx: HandlerContext, request: Request, path: string, query: ReadQuery): Promise<Response> {
  if (ctx.live.count >= ctx.options.maxLiveReaders) return tooManyReaders(ctx)
  ctx.live.count++
  const follower = ctx.waiters.follow()
  let first
  try {
    first = await streamRead(ctx.pool, path, query.offset, ctx.options.maxReadBytes)
    follower.place(first.meta.streamId)
  } catch (error) {
    follower.leave()
    ctx.live.count--
    return refusal(ctx, error, path)
  }
  const base64 = !isTextType(first.meta.contentType)
  const stop = new AbortController()
  const signal = AbortSignal.any([stop.signal, request.signal, ctx.shutdown.signal])
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const session = new SseSession(ctx, path, query, base64, follower, signal, (text) => controller.enqueue(Buffer.from(text)))
      void session
        .run(first)
        .catch(() => undefined)
        .finally(() => {
          follower.leave()
          ctx.live.count--
          try {
            controller.close()
          } catch {
            // already cancelled by the client
          }
        })
    },
    cancel() {
      stop.abort()
    },
  })
  return respond(200, {
    'Content-Type': 'text/event-stream',
    'Cache-Control': 'no-cache, no-store',
    [H.sseEncoding]: base64 ? 'base64' : undefined,
  }, body)
}

class SseSession {
  private cursor: string
  private readonly end: number

  constructor(
    private readonly ctx: HandlerContext,
    private readonly path: string,
    query: ReadQuery,
    private readonly base64: boolean,
    private readonly follower: StreamFollower,
    private readonly signal: AbortSignal,
    private readonly write: (text: string) => void,
  ) {
    this.cursor = nextCursor(query.cursor)
    this.end = performance.now() + ctx.options.sseLifetimeMs
  }

  /** The cursor for the next control event: never below the one already sent. */
  private currentCursor(): string {
    const now = nextCursor(null)
    if (Number(now) > Number(this.cursor)) this.cursor = now
    return this.cursor
  }

  async run(first: { meta: ReadMeta; body: Buffer }): Promise<void> {
    let read: { meta: ReadMeta; body: Buffer } | undefined = first
    let announced = false
    for (;;) {
      if (this.signal.aborted) return
      if (read !== undefined) {
        const { meta, body } = read
        const data = hasData(meta)
        if (data) this.write(dataEvent(this.base64 ? body : readBody(meta, body), this.base64))
        // a close that finds the reader with all the data still ends with its control event
        if (data || !announced || meta.closed) this.write(controlEvent(meta, this.currentCursor()))
        announced = true
        if (meta.closed) return
        this.offset = meta.nextOffset
        if (data && !meta.upToDate) {
          read = await this.read()
          continue
        }
      }
      read = undefined
      const left = this.end - performance.now()
      if (left <= 0) return
      const how = await this.follower.wait(Math.min(left, this.ctx.options.sseHeartbeatMs), this.signal)
      if (how === 'abort' || how === 'shutdown') return
      if (how === 'timeout') {
        if (performance.now() < this.end) this.write(':\n\n')
        continue
      }
      read = await this.read()
    }
  }

  private offset = ''

  private read(): Promise<{ meta: ReadMeta; body: Buffer }> {
    this.follower.reset()
    return streamRead(this.ctx.pool, this.path, this.offset, this.ctx.options.maxReadBytes)
  }
}
