/**
 * node:http glue for fetch-style handlers (`Request` in, `Response` out), as
 * TanStack AI's SSE helpers produce them. Frameworks with fetch handlers
 * (Next.js, Hono, TanStack Start, ...) need none of this.
 */
import http from 'node:http'

export type FetchHandler = (request: Request) => Response | Promise<Response>

/** The incoming request as a fetch `Request`. */
export async function toRequest(req: http.IncomingMessage): Promise<Request> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const headers = new Headers()
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === 'string') headers.set(name, value)
  }
  const method = req.method ?? 'GET'
  return new Request(`http://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`, {
    method,
    headers,
    ...(method === 'GET' || method === 'HEAD' ? {} : { body: Buffer.concat(chunks) }),
  })
}

/**
 * Stream a `Response` to the client. The headers go out at once (a resume may
 * wait a while for its first chunk; the client must see the 200 first). When
 * the client goes away, the body is cancelled: a resume reader stops polling
 * the database, a fresh producer keeps draining into the durable log. That is
 * the *response's* 'close': the request's has already fired once its body
 * was read.
 */
export async function sendResponse(response: Response, res: http.ServerResponse): Promise<void> {
  // Headers.forEach, not Object.fromEntries(headers): that needs the DOM.Iterable lib.
  const headers: Record<string, string> = {}
  response.headers.forEach((value, name) => {
    headers[name] = value
  })
  res.writeHead(response.status, headers)
  res.flushHeaders()
  if (response.body === null) return void res.end()
  const reader = response.body.getReader()
  let closed = false
  let wakeDrain: (() => void) | undefined
  const onClose = () => {
    closed = true
    wakeDrain?.()
    void reader.cancel().catch(() => undefined)
  }
  res.once('close', onClose)
  try {
    while (!closed) {
      const { value, done } = await reader.read()
      if (done || closed) break
      if (!res.write(value)) {
        // Back-pressure: wait for the client to catch up (or to go away).
        await new Promise<void>((resolve) => {
          wakeDrain = resolve
          res.once('drain', resolve)
        })
        wakeDrain = undefined
      }
    }
  } finally {
    res.off('close', onClose)
    res.end()
  }
}

/** A `node:http` request listener for a fetch-style handler. */
export function nodeHandler(handler: FetchHandler): http.RequestListener {
  return (req, res) => {
    void (async () => {
      const response = await handler(await toRequest(req))
      await sendResponse(response, res)
    })().catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500)
      res.end(String(error))
    })
  }
}
