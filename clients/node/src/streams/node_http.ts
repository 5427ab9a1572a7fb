/**
 * `serveStreams(options)`: the stream handler on a node:http server. Request
 * bodies stream into the handler (a body past `maxBodyBytes` is refused
 * without being buffered), responses stream out (SSE is written as it is
 * produced), and a client that disconnects aborts its request's signal, so a
 * waiting long-poll or SSE reader stops at once.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { createStreamHandler, type StreamHandler, type StreamHandlerOptions } from './handler.js'

export interface ServeStreamsOptions extends StreamHandlerOptions {
  /** Port to listen on (0: any free port). */
  port: number
  /** Address to bind (default 127.0.0.1). */
  host?: string
}

export interface StreamServer {
  /** The node:http server. */
  server: http.Server
  /** The handler it serves (for `liveReaders`). */
  handler: StreamHandler
  /** `http://host:port`, with the port actually bound. */
  url: string
  port: number
  /** Answer waiting readers, stop accepting connections and close the listener share. Does not end the pool. */
  close(): Promise<void>
}

/** A fetch Request for a node:http request; `signal` aborts when the client goes away. */
export function toRequest(req: http.IncomingMessage, signal: AbortSignal): Request {
  const host = req.headers.host ?? 'localhost'
  const url = new URL(req.url ?? '/', `http://${host}`)
  const headers = new Headers()
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue
    if (Array.isArray(value)) for (const v of value) headers.append(name, v)
    else headers.set(name, value)
  }
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'OPTIONS'
  return new Request(url, {
    method: req.method ?? 'GET',
    headers,
    signal,
    ...(hasBody ? { body: bodyOf(req), duplex: 'half' } : {}),
  } as RequestInit)
}

/**
 * A request body as a web stream, read on demand. Cancelling it (a body past
 * maxBodyBytes) discards the rest instead of destroying the socket, so the
 * client still gets its 413; a client that goes away mid-body errors it.
 */
function bodyOf(req: http.IncomingMessage): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      return new Promise<void>((resolve) => {
        const cleanup = () => {
          req.off('readable', tryRead)
          req.off('end', onEnd)
          req.off('error', onError)
          req.off('close', onClose)
        }
        const onEnd = () => {
          cleanup()
          controller.close()
          resolve()
        }
        const onError = (error: unknown) => {
          cleanup()
          controller.error(error instanceof Error ? error : new Error('aborted'))
          resolve()
        }
        const onClose = () => {
          if (!req.readableEnded) onError(new Error('aborted'))
        }
        function tryRead() {
          const chunk = req.read() as Buffer | null
          if (chunk === null) return
          cleanup()
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength))
          resolve()
        }
        if (req.readableEnded) return onEnd()
        if (req.destroyed) return onError(new Error('aborted'))
        req.on('readable', tryRead)
        req.on('end', onEnd)
        req.on('error', onError)
        req.on('close', onClose)
        tryRead()
      })
    },
    cancel() {
      req.resume()
    },
  })
}

/** Write a fetch Response to a node:http response, streaming its body; stops when the client goes away. */
export async function writeResponse(response: Response, res: http.ServerResponse, signal: AbortSignal): Promise<void> {
  const headers: Record<string, string> = {}
  response.headers.forEach((value, name) => {
    headers[name] = value
  })
  res.writeHead(response.status, headers)
  if (response.body === null) {
    res.end()
    return
  }
  res.flushHeaders()
  const reader = response.body.getReader()
  const onAbort = () => void reader.cancel().catch(() => undefined)
  signal.addEventListener('abort', onAbort, { once: true })
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      if (!res.write(value)) await new Promise<void>((resolve) => {
        const go = () => {
          res.off('drain', go)
          res.off('close', go)
          resolve()
        }
        res.on('drain', go)
        res.on('close', go)
      })
      if (signal.aborted) break
    }
  } catch {
    // the body failed or was cancelled: end what was sent
  } finally {
    signal.removeEventListener('abort', onAbort)
    res.end()
  }
}

/** Methods `new Request` refuses. */
const FORBIDDEN_METHODS = new Set(['CONNECT', 'TRACE', 'TRACK'])

/** node:http's own statuses for the requests it refuses (its default clientError handling). */
const CLIENT_ERROR_STATUS: Record<string, [number, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'Payload Too Large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout'],
}

/** The headers of a response written outside the handler (baseHeaders' security headers). */
const PLAIN_HEADERS: Record<string, string> = {
  'X-Content-Type-Options': 'nosniff',
  'Cross-Origin-Resource-Policy': 'cross-origin',
  'Access-Control-Allow-Origin': '*',
  'Content-Type': 'text/plain; charset=utf-8',
  'Cache-Control': 'no-store',
}

export async function serveStreams(options: ServeStreamsOptions): Promise<StreamServer> {
  const { port, host = '127.0.0.1', ...handlerOptions } = options
  const handler = createStreamHandler(handlerOptions)
  const server = http.createServer((req, res) => {
    const abort = new AbortController()
    res.on('close', () => {
      if (!res.writableFinished) abort.abort()
    })
    req.on('error', () => abort.abort())
    let request: Request
    try {
      request = toRequest(req, abort.signal)
    } catch {
      // A Host that makes no URL, or a method fetch refuses (TRACE, TRACK): the client's fault, not a 500.
      const forbidden = FORBIDDEN_METHODS.has((req.method ?? '').toUpperCase())
      res.writeHead(forbidden ? 405 : 400, {
        ...PLAIN_HEADERS,
        ...(forbidden ? { Allow: 'GET, HEAD, POST, PUT, DELETE, OPTIONS' } : {}),
      })
      res.end(forbidden ? `Method ${req.method} is not allowed.` : 'Malformed request.')
      return
    }
    void (async () => {
      try {
        const response = await handler(request)
        if (abort.signal.aborted) {
          await response.body?.cancel().catch(() => undefined)
          res.destroy()
          return
        }
        if (!req.complete) {
          // Answered before its body arrived in full (refused headers, a body past the limit): discard
          // the rest and close the connection after the response rather than parse what follows. A
          // request without a body is complete once parsed, so its connection stays open.
          res.shouldKeepAlive = false
          req.resume()
        }
        await writeResponse(response, res, abort.signal)
      } catch {
        if (!res.headersSent) res.writeHead(500, { 'X-Content-Type-Options': 'nosniff' })
        res.end()
      }
    })()
  })
  // Requests node:http refuses before the handler sees them (bad framing, headers too large, timeouts)
  // get node's status, with the headers every response carries.
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage
    if (error.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent === true) {
      socket.destroy()
      return
    }
    const [status, reason] = CLIENT_ERROR_STATUS[error.code ?? ''] ?? [400, 'Bad Request']
    const headers = Object.entries(PLAIN_HEADERS).map(([k, v]) => `${k}: ${v}\r\n`).join('')
    socket.end(`HTTP/1.1 ${status} ${reason}\r\n${headers}Content-Length: 0\r\nConnection: close\r\n\r\n`)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const bound = (server.address() as AddressInfo).port
  const urlHost = host.includes(':') ? `[${host}]` : host
  let closing: Promise<void> | undefined
  return {
    server,
    handler,
    url: `http://${urlHost}:${bound}`,
    port: bound,
    close: () =>
      (closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()))
        await handler.close()
        server.closeIdleConnections()
        // Responses already answered by close() finish on their own; give them a moment, then drop the rest.
        const timer = setTimeout(() => server.closeAllConnections(), 2000)
        timer.unref()
        await closed
        clearTimeout(timer)
      })()),
  }
}
