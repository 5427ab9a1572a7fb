/**
 * `serveStreams(options)`: the stream handler on a node:http server. Request
 * bodies stream into the handler (a body past `maxBodyBytes` is refused
 * without being buffered), responses stream out (SSE is written as it is
 * produced), and a client that disconnects aborts its request's signal, so a
 * waiting long-poll or SSE reader stops at once.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
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
    ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream<Uint8Array>, duplex: 'half' } : {}),
  } as RequestInit)
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

export async function serveStreams(options: ServeStreamsOptions): Promise<StreamServer> {
  const { port, host = '127.0.0.1', ...handlerOptions } = options
  const handler = createStreamHandler(handlerOptions)
  const server = http.createServer((req, res) => {
    const abort = new AbortController()
    res.on('close', () => {
      if (!res.writableFinished) abort.abort()
    })
    req.on('error', () => abort.abort())
    void (async () => {
      try {
        const response = await handler(toRequest(req, abort.signal))
        if (abort.signal.aborted) {
          await response.body?.cancel().catch(() => undefined)
          res.destroy()
          return
        }
        await writeResponse(response, res, abort.signal)
      } catch {
        if (!res.headersSent) res.writeHead(500, { 'X-Content-Type-Options': 'nosniff' })
        res.end()
      }
    })()
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
