/**
 * One webhook request (PROTOCOL.md §7.1): POST the signed body over
 * node:http(s), with the SSRF rules of ssrf.ts applied to the URL and, inside
 * the connection's lookup, to every address the host resolves to. Redirects
 * are not followed (a 3xx is a failed delivery); the whole exchange has one
 * deadline; at most 64 KiB of the answer is read.
 */
import http from 'node:http'
import https from 'node:https'
import { checkedLookup, checkWebhookUrl, type LookupFunction } from './ssrf.js'

const MAX_ANSWER_BYTES = 64 * 1024

/** What a receiver answered: `ok` for a 2xx, `done` when its JSON body was `{ "done": true }`. */
export interface WebhookAnswer {
  status: number
  ok: boolean
  done: boolean
}

export interface PostOptions {
  timeoutMs: number
  lookup?: LookupFunction | undefined
}

/** POST `body` with `headers` to `target`; rejects on a refused target, a network error or the deadline. */
export function postWebhook(target: string, body: Buffer, headers: Record<string, string>, options: PostOptions): Promise<WebhookAnswer> {
  const url = new URL(target)
  checkWebhookUrl(url)
  const client = url.protocol === 'https:' ? https : http
  return new Promise<WebhookAnswer>((resolve, reject) => {
    const request = client.request(url, {
      method: 'POST',
      agent: false,
      headers: { ...headers, 'Content-Length': String(body.length) },
      lookup: checkedLookup(url, options.lookup),
    })
    const timer = setTimeout(() => request.destroy(new Error(`no answer within ${options.timeoutMs} ms`)), options.timeoutMs)
    const settle = <T>(fn: (value: T) => void) => (value: T) => {
      clearTimeout(timer)
      fn(value)
    }
    request.on('error', settle(reject))
    request.on('response', (response) => {
      readAnswer(response).then(settle(resolve), settle(reject))
    })
    request.end(body)
  })
}

/** The status of `response` and whether its (bounded) JSON body says `done: true`. */
async function readAnswer(response: http.IncomingMessage): Promise<WebhookAnswer> {
  const status = response.statusCode ?? 0
  const chunks: Buffer[] = []
  let total = 0
  for await (const chunk of response as AsyncIterable<Buffer>) {
    total += chunk.length
    if (total > MAX_ANSWER_BYTES) {
      response.destroy()
      break
    }
    chunks.push(chunk)
  }
  const ok = status >= 200 && status < 300
  return { status, ok, done: ok && total <= MAX_ANSWER_BYTES && saysDone(Buffer.concat(chunks)) }
}

/** Whether a webhook answer body is a JSON object with `done: true`. */
function saysDone(body: Buffer): boolean {
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'))
    return typeof parsed === 'object' && parsed !== null && (parsed as { done?: unknown }).done === true
  } catch {
    return false
  }
}
