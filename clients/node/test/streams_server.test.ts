/**
 * The stream server's own behaviour beyond the protocol suite: the CLI's
 * refusal to start without access control, bearer tokens, the live-reader
 * limit, graceful shutdown and the body limit.
 */
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { bearerAuthorizer, serveStreams, type ServeStreamsOptions, type StreamServer } from '../src/index.js'
import { CliUsageError, parseCliArgs } from '../src/streams/cli_main.js'
import { makePool, reset, until } from './helpers.js'

const pool = makePool()
const servers: StreamServer[] = []

async function serve(options: Partial<ServeStreamsOptions> = {}): Promise<StreamServer> {
  const server = await serveStreams({ pool, port: 0, ...options })
  servers.push(server)
  return server
}

beforeEach(async () => {
  await reset(pool)
})

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

const url = (server: StreamServer, name: string) => `${server.url}/v1/stream/${name}`

describe('CLI', () => {
  it('refuses to start without --token or --insecure-local', () => {
    expect(() => parseCliArgs(['--database-url', 'postgres://x/db', '--port', '0'], {})).toThrow(CliUsageError)
    expect(() => parseCliArgs(['--database-url', 'postgres://x/db', '--port', '0'], {})).toThrow(/--insecure-local/)
  })

  it('binds loopback only with --insecure-local', () => {
    const config = parseCliArgs(['--database-url', 'postgres://x/db', '--port', '8080', '--insecure-local'], {})
    expect(config.host).toBe('127.0.0.1')
    expect(config.token).toBeUndefined()
    expect(() =>
      parseCliArgs(['--database-url', 'postgres://x/db', '--port', '8080', '--insecure-local', '--host', '0.0.0.0'], {}),
    ).toThrow(/loopback/)
  })

  it('takes a token from the flag or the environment', () => {
    expect(parseCliArgs(['--database-url', 'u', '--port', '1', '--token', 't'], {}).token).toBe('t')
    expect(parseCliArgs(['--database-url', 'u', '--port', '1'], { SANDBOX_PERSIST_STREAMS_TOKEN: 'e' }).token).toBe('e')
  })

  const bin = fileURLToPath(new URL('../dist/streams/cli.js', import.meta.url))
  it.skipIf(!existsSync(bin))('the built bin exits with status 2 and says why', () => {
    const run = spawnSync(process.execPath, [bin, '--database-url', 'postgres://x/db', '--port', '0'], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
      timeout: 30_000,
    })
    expect(run.status).toBe(2)
    expect(run.stderr).toMatch(/Refusing to start without access control/)
  })
})

describe('bearer token', () => {
  it('is required for writes, and for reads unless reads are public', async () => {
    const server = await serve({ authorize: bearerAuthorizer('s3cret') })
    const auth = { Authorization: 'Bearer s3cret' }
    const put = await fetch(url(server, 'tok'), { method: 'PUT', headers: { 'Content-Type': 'text/plain' } })
    expect(put.status).toBe(401)
    expect(put.headers.get('x-content-type-options')).toBe('nosniff')
    const wrong = await fetch(url(server, 'tok'), { method: 'PUT', headers: { 'Content-Type': 'text/plain', Authorization: 'Bearer nope' } })
    expect(wrong.status).toBe(401)
    const ok = await fetch(url(server, 'tok'), { method: 'PUT', headers: { 'Content-Type': 'text/plain', ...auth }, body: 'hi' })
    expect(ok.status).toBe(201)
    expect((await fetch(url(server, 'tok'), { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: 'x' })).status).toBe(401)
    expect((await fetch(url(server, 'tok'), { method: 'DELETE' })).status).toBe(401)
    expect((await fetch(url(server, 'tok'))).status).toBe(401)
    const read = await fetch(url(server, 'tok'), { headers: auth })
    expect(read.status).toBe(200)
    expect(await read.text()).toBe('hi')

    const open = await serve({ authorize: bearerAuthorizer('s3cret', { publicReads: true }) })
    expect((await fetch(url(open, 'tok'))).status).toBe(200)
    expect((await fetch(url(open, 'tok'), { method: 'HEAD' })).status).toBe(200)
    expect((await fetch(url(open, 'tok'), { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: 'x' })).status).toBe(401)
  })
})

describe('limits and shutdown', () => {
  it('refuses a body over maxBodyBytes with 413', async () => {
    const server = await serve({ maxBodyBytes: 10 })
    expect((await fetch(url(server, 'big'), { method: 'PUT', headers: { 'Content-Type': 'text/plain' } })).status).toBe(201)
    const post = await fetch(url(server, 'big'), { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: 'x'.repeat(11) })
    expect(post.status).toBe(413)
    const fits = await fetch(url(server, 'big'), { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: 'x'.repeat(10) })
    expect(fits.status).toBe(204)
    // A chunked body (no Content-Length) is cut off as it streams.
    const chunks = new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < 4; i++) c.enqueue(new TextEncoder().encode('abcdef'))
        c.close()
      },
    })
    const chunked = await fetch(url(server, 'big'), {
      method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: chunks, duplex: 'half',
    } as RequestInit)
    expect(chunked.status).toBe(413)
  })

  it('answers 503 with Retry-After past maxLiveReaders', async () => {
    const server = await serve({ maxLiveReaders: 1, longPollTimeoutMs: 60_000, retryAfterSeconds: 7 })
    const put = await fetch(url(server, 'live'), { method: 'PUT', headers: { 'Content-Type': 'text/plain' } })
    const tail = put.headers.get('stream-next-offset')!
    const waiting = fetch(`${url(server, 'live')}?offset=${tail}&live=long-poll`)
    await until(() => server.handler.liveReaders === 1)
    const refused = await fetch(`${url(server, 'live')}?offset=${tail}&live=long-poll`)
    expect(refused.status).toBe(503)
    expect(refused.headers.get('retry-after')).toBe('7')
    const sse = await fetch(`${url(server, 'live')}?offset=${tail}&live=sse`)
    expect(sse.status).toBe(503)
    await fetch(url(server, 'live'), { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: 'wake' })
    const answered = await waiting
    expect(answered.status).toBe(200)
    expect(await answered.text()).toBe('wake')
  })

  it('answers 503 with Retry-After, not 500, while the database cannot be reached', async () => {
    const reports: Array<{ event: string }> = []
    const unreachable = new pg.Pool({ host: '127.0.0.1', port: 1, connectionTimeoutMillis: 2_000 })
    try {
      const server = await serve({
        pool: unreachable, retryAfterSeconds: 3, listener: { listenerClient: () => new pg.Client({ host: '127.0.0.1', port: 1 }) },
        logger: { warn: (_m: string, r: { event: string }) => void reports.push(r) },
      })
      for (const request of [fetch(url(server, 'down')), fetch(url(server, 'down'), { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: 'x' })]) {
        const answer = await request
        expect(answer.status).toBe(503)
        expect(answer.headers.get('retry-after')).toBe('3')
      }
      expect(reports.map((r) => r.event)).toContain('streams.database_unavailable')
      expect(reports.map((r) => r.event)).not.toContain('streams.request_failed')
    } finally {
      await unreachable.end()
    }
  })

  it('ends an SSE reader that already has every byte with a streamClosed control event when the stream closes', async () => {
    const server = await serve({ sseLifetimeMs: 60_000, sseHeartbeatMs: 60_000 })
    const put = await fetch(url(server, 'sse-close'), { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: 'all' })
    const tail = put.headers.get('stream-next-offset')!
    const reader = await fetch(`${url(server, 'sse-close')}?offset=${tail}&live=sse`)
    await until(() => server.handler.liveReaders === 1)
    const close = await fetch(url(server, 'sse-close'), { method: 'POST', headers: { 'Stream-Closed': 'true' } })
    expect(close.status).toBe(204)
    const events = (await reader.text()).split('\n\n').filter((e) => e.startsWith('event:'))
    const last = events.at(-1)!
    expect(last.startsWith('event: control\n')).toBe(true)
    expect(JSON.parse(last.slice(last.indexOf('data:') + 5))).toMatchObject({ streamClosed: true, upToDate: true })
  })

  it('close() answers waiting long-polls with 204 and ends SSE streams', async () => {
    const server = await serve({ longPollTimeoutMs: 60_000 })
    const put = await fetch(url(server, 'bye'), { method: 'PUT', headers: { 'Content-Type': 'text/plain' } })
    const tail = put.headers.get('stream-next-offset')!
    const polls = [1, 2, 3].map(() => fetch(`${url(server, 'bye')}?offset=${tail}&live=long-poll`))
    const sse = await fetch(`${url(server, 'bye')}?offset=${tail}&live=sse`)
    expect(sse.status).toBe(200)
    await until(() => server.handler.liveReaders === 4)
    const started = performance.now()
    const closing = server.close()
    for (const response of await Promise.all(polls)) {
      expect(response.status).toBe(204)
      expect(response.headers.get('stream-up-to-date')).toBe('true')
      expect(response.headers.get('stream-next-offset')).toBe(tail)
    }
    const text = await sse.text() // ends once the server ends the stream
    expect(text).toContain('event: control')
    await closing
    expect(performance.now() - started).toBeLessThan(10_000)
    expect(server.handler.liveReaders).toBe(0)
  })

  it('wakes a long-poll on an append through LISTEN, not polling', async () => {
    const server = await serve({ longPollTimeoutMs: 60_000, fallbackPollMs: 60_000 })
    const put = await fetch(url(server, 'wake'), { method: 'PUT', headers: { 'Content-Type': 'text/plain' } })
    const tail = put.headers.get('stream-next-offset')!
    const waiting = fetch(`${url(server, 'wake')}?offset=${tail}&live=long-poll`)
    await until(() => server.handler.liveReaders === 1)
    const started = performance.now()
    await fetch(url(server, 'wake'), { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: 'now' })
    const response = await waiting
    expect(response.status).toBe(200)
    expect(await response.text()).toBe('now')
    expect(performance.now() - started).toBeLessThan(5_000)
  })

  it('answers a CORS preflight allowing the protocol headers', async () => {
    const server = await serve()
    const response = await fetch(url(server, 'any'), {
      method: 'OPTIONS',
      headers: { Origin: 'https://example.com', 'Access-Control-Request-Method': 'PUT', 'Access-Control-Request-Headers': 'producer-id' },
    })
    expect(response.status).toBe(204)
    const allowed = response.headers.get('access-control-allow-headers')!.toLowerCase()
    for (const h of ['if-none-match', 'producer-id', 'producer-epoch', 'producer-seq', 'stream-seq', 'stream-closed', 'stream-ttl']) {
      expect(allowed).toContain(h)
    }
    expect(response.headers.get('access-control-expose-headers')!.toLowerCase()).toContain('stream-next-offset')
    expect(response.headers.get('cross-origin-resource-policy')).toBe('cross-origin')
  })
})
