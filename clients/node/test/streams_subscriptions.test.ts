/**
 * The subscription APIs of the stream server (PROTOCOL.md §6-7, §12.8-12.10)
 * beyond the conformance suite's 6 tests: webhook signatures against the
 * JWKS, the SSRF rules at creation and at delivery, retries and status,
 * synchronous and asynchronous acks with fencing, pull-wake leases, several
 * servers sharing deliveries, shutdown with a delivery in flight, routing and
 * access control. Tests wait for events (a webhook request arriving, a
 * condition in the database), never for a time.
 */
import { createPublicKey, createHash, generateKeyPairSync, verify } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import pg from 'pg'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createStreamHandler, serveStreams, type ServeStreamsOptions, type StreamServer, type SandboxPersistReport } from '../src/index.js'
import { parseCliArgs } from '../src/streams/cli_main.js'
import { WebhookSigner } from '../src/streams/signing.js'
import { checkWebhookUrl, isBlockedAddress } from '../src/streams/ssrf.js'
import { makePool, reset, until } from './helpers.js'

const pool = makePool({ max: 16 })
const servers: StreamServer[] = []
const receivers: Receiver[] = []

interface Received {
  rawBody: string
  body: Record<string, any>
  signature: string | undefined
  /** Answer this request (a receiver that holds its requests). */
  answer: (status: number, body?: unknown) => void
}

interface Receiver {
  url: string
  port: number
  received: Received[]
  /** The `n`th request (1-based), once it has arrived. */
  nth: (n: number) => Promise<Received>
  close: () => Promise<void>
}

/** A webhook receiver on 127.0.0.1; `reply` answers each request, or holds it when it returns undefined. */
async function receiver(reply: (n: number) => { status: number; body?: unknown } | undefined = () => ({ status: 200, body: {} })): Promise<Receiver> {
  const received: Received[] = []
  const waiters: Array<() => void> = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8')
      const answer = (status: number, body: unknown = {}) => {
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(body))
      }
      const signature = req.headers['webhook-signature']
      received.push({ rawBody, body: JSON.parse(rawBody), signature: typeof signature === 'string' ? signature : undefined, answer })
      const now = reply(received.length)
      if (now !== undefined) answer(now.status, now.body)
      for (const w of waiters.splice(0)) w()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  const r: Receiver = {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    nth: async (n) => {
      while (received.length < n) await new Promise<void>((resolve) => waiters.push(resolve))
      return received[n - 1]!
    },
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
  receivers.push(r)
  return r
}

const reports: SandboxPersistReport[] = []
const logger = { warn: (_m: string, r: SandboxPersistReport) => void reports.push(r) }

async function serve(options: Partial<ServeStreamsOptions> = {}): Promise<StreamServer> {
  const server = await serveStreams({ pool, port: 0, logger, subscriptions: true, ...options })
  servers.push(server)
  return server
}

beforeEach(async () => {
  reports.length = 0
  await reset(pool)
})

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
  await Promise.all(receivers.splice(0).map((r) => r.close()))
})

const root = (server: StreamServer) => `${server.url}/v1/stream/`
const subUrl = (server: StreamServer, id: string) => `${root(server)}__ds/subscriptions/${encodeURIComponent(id)}`
const json = (method: string, body: unknown, headers: Record<string, string> = {}): RequestInit => ({
  method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body),
})

async function subscribe(server: StreamServer, id: string, config: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await fetch(subUrl(server, id), json('PUT', config))
  expect(res.status, await res.clone().text()).toBe(201)
  return (await res.json()) as Record<string, any>
}

async function createStream(server: StreamServer, path: string, event: unknown = { event: 'created' }): Promise<void> {
  const res = await fetch(`${root(server)}${path}`, json('PUT', event))
  expect(res.status).toBe(201)
}

async function view(server: StreamServer, id: string): Promise<Record<string, any>> {
  return (await (await fetch(subUrl(server, id))).json()) as Record<string, any>
}

/** Whether `signature` verifies `rawBody` against the JWK Set `jwks` (as a receiver checks it). */
function verifies(rawBody: string, signature: string | undefined, jwks: { keys: Array<Record<string, string>> }): boolean {
  const m = /^t=(\d+),kid=([^,]+),ed25519=([A-Za-z0-9_-]+)$/.exec(signature ?? '')
  if (m === null) return false
  const key = jwks.keys.find((k) => k.kid === m[2])
  if (key === undefined) return false
  return verify(null, Buffer.from(`${m[1]}.${rawBody}`), createPublicKey({ key, format: 'jwk' }), Buffer.from(m[3]!, 'base64url'))
}

describe('signing', () => {
  it('DSS1 a delivery\'s signature verifies against the JWKS, and fails once one body byte changes', async () => {
    const hook = await receiver(() => ({ status: 200, body: { done: true } }))
    const server = await serve()
    const created = await subscribe(server, 'sig', { type: 'webhook', pattern: 'events/*', webhook: { url: hook.url } })
    expect(created.webhook.signing).toEqual({ alg: 'ed25519', kid: expect.stringMatching(/^ds_[A-Za-z0-9_-]+$/), jwks_url: `${root(server)}__ds/jwks.json` })
    const jwksRes = await fetch(created.webhook.signing.jwks_url)
    expect(jwksRes.headers.get('content-type')).toBe('application/jwk-set+json')
    expect(jwksRes.headers.get('cache-control')).toBe('public, max-age=300')
    const jwks = (await jwksRes.json()) as { keys: Array<Record<string, string>> }
    expect(jwks.keys).toEqual([{ kty: 'OKP', crv: 'Ed25519', kid: created.webhook.signing.kid, use: 'sig', alg: 'EdDSA', x: expect.any(String) }])
    expect(Object.keys(jwks.keys[0]!)).not.toContain('d')
    await createStream(server, 'events/a')
    const delivery = await hook.nth(1)
    expect(verifies(delivery.rawBody, delivery.signature, jwks)).toBe(true)
    const tampered = delivery.rawBody.replace('"events/a"', '"events/b"')
    expect(tampered).not.toBe(delivery.rawBody)
    expect(verifies(tampered, delivery.signature, jwks)).toBe(false)
    const t = Number(/^t=(\d+)/.exec(delivery.signature!)![1])
    expect(verifies(delivery.rawBody, delivery.signature!.replace(/^t=\d+/, `t=${t + 1}`), jwks)).toBe(false)
  })

  it('DSS2 a given PEM key is used: its kid is the RFC 7638 thumbprint prefix, stable across handlers', async () => {
    const { privateKey } = generateKeyPairSync('ed25519')
    const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
    const a = await serve({ subscriptions: { signingKey: pem, webhooks: false } })
    const b = await serve({ subscriptions: { signingKey: privateKey, webhooks: false } })
    const ka = ((await (await fetch(`${root(a)}__ds/jwks.json`)).json()) as { keys: Array<Record<string, string>> }).keys[0]!
    const kb = ((await (await fetch(`${root(b)}__ds/jwks.json`)).json()) as { keys: Array<Record<string, string>> }).keys[0]!
    expect(ka).toEqual(kb)
    const thumb = createHash('sha256').update(`{"crv":"Ed25519","kty":"OKP","x":"${ka.x}"}`).digest('base64url')
    expect(ka.kid).toBe(`ds_${thumb.slice(0, 22)}`)
    expect(new WebhookSigner().kid).not.toBe(ka.kid)
    expect(() => new WebhookSigner(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey)).toThrow(/Ed25519/)
    expect(() => new WebhookSigner('not a pem')).toThrow(TypeError)
    expect(() => createStreamHandler({ pool, subscriptions: { publicUrl: 'ftp://x' } })).toThrow(/publicUrl/)
  })
})

describe('SSRF', () => {
  it('DSS3 unsafe webhook URLs are refused at creation with 400 WEBHOOK_URL_REJECTED', async () => {
    const server = await serve({ subscriptions: { webhooks: false } })
    for (const url of ['https://10.0.0.1/h', 'https://169.254.169.254/latest', 'https://[::1]/h', 'http://example.com/h', 'ftp://x/h', 'https://192.168.1.1/h']) {
      const res = await fetch(subUrl(server, 'bad'), json('PUT', { type: 'webhook', pattern: 'events/*', webhook: { url } }))
      expect(res.status, url).toBe(400)
      expect(((await res.json()) as any).error.code, url).toBe('WEBHOOK_URL_REJECTED')
    }
    const dev = await fetch(subUrl(server, 'dev'), json('PUT', { type: 'webhook', pattern: 'events/*', webhook: { url: 'http://localhost:9/h' } }))
    expect(dev.status).toBe(201)
  })

  it('DSS4 the delivery-time rules: private, loopback, link-local, unique-local and embedded IPv4 addresses are blocked', () => {
    for (const a of ['10.1.2.3', '127.0.0.1', '169.254.169.254', '172.31.0.1', '192.168.0.1', '100.64.0.1', '0.0.0.0', '::1', '::',
      'fe80::1', 'fd00:ec2::254', 'ff02::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '64:ff9b::a9fe:a9fe', '::ffff:10.0.0.1']) {
      expect(isBlockedAddress(a), a).toBe(true)
    }
    for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) expect(isBlockedAddress(a), a).toBe(false)
    expect(() => checkWebhookUrl(new URL('http://example.com/h'))).toThrow(/https/)
    expect(() => checkWebhookUrl(new URL('https://[fd00::1]/h'))).toThrow(/not a public address/)
    expect(() => checkWebhookUrl(new URL('https://10.0.0.1/h'))).toThrow(/not a public address/)
    expect(() => checkWebhookUrl(new URL('http://localhost:1/h'))).not.toThrow()
    expect(() => checkWebhookUrl(new URL('http://127.0.0.5:1/h'))).not.toThrow()
    expect(() => checkWebhookUrl(new URL('https://hooks.example.com/h'))).not.toThrow()
  })

  it('DSS5 a host name other than localhost resolving to 127.0.0.1 is refused at delivery: nothing is sent, the subscription fails', async () => {
    const hook = await receiver()
    const asked: string[] = []
    const lookup = ((hostname: string, _o: unknown, cb: (e: null, a: Array<{ address: string; family: number }>) => void) => {
      asked.push(hostname)
      cb(null, [{ address: '127.0.0.1', family: 4 }])
    }) as never
    const server = await serve({ subscriptions: { lookup } })
    await subscribe(server, 'rebind', { type: 'webhook', pattern: 'events/*', webhook: { url: `https://hooks.test:${hook.port}/hook` } })
    await createStream(server, 'events/r')
    await until(() => reports.some((r) => r.event === 'subscriptions.webhook_refused'))
    expect(asked).toContain('hooks.test')
    expect(reports.find((r) => r.event === 'subscriptions.webhook_refused')!.message).toMatch(/hooks\.test.*127\.0\.0\.1/)
    await until(async () => (await view(server, 'rebind')).status === 'failed')
    expect(hook.received).toHaveLength(0)
  })
})

describe('webhook delivery', () => {
  it('DSS6 a webhook answering 500 is retried; status is failed until a delivery succeeds, then active', async () => {
    const hook = await receiver((n) => (n === 1 ? { status: 500 } : undefined))
    const server = await serve()
    await subscribe(server, 'retry', { type: 'webhook', pattern: 'events/*', webhook: { url: hook.url } })
    await createStream(server, 'events/x')
    const first = await hook.nth(1)
    const second = await hook.nth(2) // the retry, held unanswered
    expect(second.body.wake_id).toBe(first.body.wake_id)
    expect((await view(server, 'retry')).status).toBe('failed')
    expect(reports.map((r) => r.event)).toContain('subscriptions.webhook_failed')
    second.answer(200, { done: true })
    const tail = second.body.streams[0].tail_offset as string
    await until(async () => {
      const v = await view(server, 'retry')
      return v.status === 'active' && v.streams[0].acked_offset === tail
    })
  })

  it('DSS7 an answer {done: true} acks the wake\'s snapshot; a later append wakes again with a new generation', async () => {
    const hook = await receiver(() => ({ status: 200, body: { done: true } }))
    const server = await serve()
    await createStream(server, 'events/s', [])
    await subscribe(server, 'sync', { type: 'webhook', streams: ['events/s'], webhook: { url: hook.url } })
    await fetch(`${root(server)}events/s`, json('POST', { n: 1 }))
    const wake = (await hook.nth(1)).body
    expect(wake).toMatchObject({ subscription_id: 'sync', callback_url: `${subUrl(server, 'sync')}/callback` })
    expect(Object.keys(wake).sort()).toEqual(['callback_token', 'callback_url', 'generation', 'streams', 'subscription_id', 'wake_id'])
    const tail = wake.streams[0].tail_offset as string
    await until(async () => (await view(server, 'sync')).streams[0].acked_offset === tail)
    await fetch(`${root(server)}events/s`, json('POST', { n: 2 }))
    const next = (await hook.nth(2)).body
    expect(next.generation).toBeGreaterThan(wake.generation)
    expect(next.wake_id).not.toBe(wake.wake_id)
  })

  it('DSS8 an async callback: no token or a wrong one is 401, the right one acks, a replay or stale generation is 409 FENCED', async () => {
    const hook = await receiver()
    const server = await serve()
    await subscribe(server, 'async', { type: 'webhook', pattern: 'events/*', webhook: { url: hook.url } })
    await createStream(server, 'events/c')
    const wake = (await hook.nth(1)).body
    const tail = wake.streams.find((s: { path: string }) => s.path === 'events/c').tail_offset
    const ack = { wake_id: wake.wake_id, generation: wake.generation, acks: [{ stream: 'events/c', offset: tail }], done: true }
    const none = await fetch(wake.callback_url, json('POST', ack))
    expect(none.status).toBe(401)
    expect(((await none.json()) as any).error.code).toBe('TOKEN_INVALID')
    const wrong = await fetch(wake.callback_url, json('POST', ack, { authorization: 'Bearer nope' }))
    expect(wrong.status).toBe(401)
    expect(((await wrong.json()) as any).error.code).toBe('TOKEN_INVALID')
    const stale = await fetch(wake.callback_url, json('POST', { ...ack, generation: wake.generation - 1 }, { authorization: `Bearer ${wake.callback_token}` }))
    expect(stale.status).toBe(409)
    expect(((await stale.json()) as any).error.code).toBe('FENCED')
    const ok = await fetch(wake.callback_url, json('POST', ack, { authorization: `Bearer ${wake.callback_token}` }))
    expect(ok.status).toBe(200)
    expect(await ok.json()).toEqual({ ok: true, next_wake: false })
    const replay = await fetch(wake.callback_url, json('POST', ack, { authorization: `Bearer ${wake.callback_token}` }))
    expect(replay.status).toBe(409)
    expect(((await replay.json()) as any).error.code).toBe('FENCED')
    expect((await view(server, 'async')).streams[0].acked_offset).toBe(tail)
    await fetch(`${root(server)}events/c`, json('POST', { n: 2 }))
    const next = (await hook.nth(2)).body
    expect((await fetch(subUrl(server, 'async'), { method: 'DELETE' })).status).toBe(204)
    const afterDelete = await fetch(next.callback_url, json('POST', { wake_id: next.wake_id, generation: next.generation, done: true }, {
      authorization: `Bearer ${next.callback_token}`,
    }))
    expect(afterDelete.status).toBe(404)
    expect(((await afterDelete.json()) as any).error.code).toBe('SUBSCRIPTION_NOT_FOUND')
  })

  it('DSS9 two handlers (each with its own listener) on one database deliver every wake exactly once', async () => {
    const hook = await receiver(() => ({ status: 200, body: { done: true } }))
    const publicUrl = 'http://127.0.0.1:1'
    const a = await serve({ subscriptions: { publicUrl }, listener: { listenerClient: () => new pg.Client() } })
    const b = await serve({ subscriptions: { publicUrl }, listener: { listenerClient: () => new pg.Client() } })
    const ids = ['m0', 'm1', 'm2', 'm3', 'm4', 'm5']
    for (const id of ids) {
      await createStream(a, `multi/${id}`, [])
      await subscribe(a, id, { type: 'webhook', streams: [`multi/${id}`], webhook: { url: hook.url } })
    }
    await Promise.all(ids.map((id, i) => fetch(`${root(i % 2 === 0 ? a : b)}multi/${id}`, json('POST', { i }))))
    await until(async () => {
      const views = await Promise.all(ids.map((id) => view(a, id)))
      return views.every((v) => hook.received.some((r) => r.body.subscription_id === v.id && r.body.streams[0].tail_offset === v.streams[0].acked_offset))
    })
    // close() waits for deliveries in flight: after it, the count is final.
    await Promise.all(servers.splice(0).map((s) => s.close()))
    const wakes = hook.received.map((r) => `${r.body.subscription_id}/${r.body.generation}`)
    expect(new Set(wakes).size).toBe(wakes.length)
    expect(wakes.length).toBe(ids.length)
  })

  it('DSS16 a lease that lapses without a callback is expired on the timer (no notification) and the work is woken again', async () => {
    const hook = await receiver() // answers {}: not done, so a callback is awaited within the lease
    const server = await serve()
    await subscribe(server, 'lapse', { type: 'webhook', pattern: 'events/*', webhook: { url: hook.url }, lease_ttl_ms: 1000 })
    await createStream(server, 'events/l')
    const first = (await hook.nth(1)).body
    const second = (await hook.nth(2)).body
    expect(second.generation).toBeGreaterThan(first.generation)
    const late = await fetch(first.callback_url, json('POST', { wake_id: first.wake_id, generation: first.generation, done: true }, {
      authorization: `Bearer ${first.callback_token}`,
    }))
    expect([401, 409]).toContain(late.status)
  })

  it('DSS10 close() with a delivery in flight waits for it and records its outcome', async () => {
    const hook = await receiver(() => undefined) // holds every request
    const server = await serve()
    await subscribe(server, 'inflight', { type: 'webhook', pattern: 'events/*', webhook: { url: hook.url } })
    await createStream(server, 'events/f')
    const delivery = await hook.nth(1)
    let closed = false
    const closing = server.close().then(() => (closed = true))
    servers.splice(servers.indexOf(server), 1)
    await pool.query('SELECT 1') // a round trip: close() had every chance to finish, were it not waiting
    expect(closed).toBe(false)
    delivery.answer(200, { done: true })
    await closing
    const tail = delivery.body.streams[0].tail_offset
    const row = await pool.query(`SELECT sandbox_persist.stream_subscription_get('inflight') AS v`)
    expect(row.rows[0].v.streams[0].acked_offset).toBe(tail)
  })

  it('DSS19 a subscription deleted while its webhook is out: the answer is dropped quietly (no delivery_failed report)', async () => {
    const hook = await receiver(() => undefined)
    const server = await serve()
    await subscribe(server, 'gone', { type: 'webhook', pattern: 'events/*', webhook: { url: hook.url } })
    await createStream(server, 'events/g')
    const delivery = await hook.nth(1)
    expect((await fetch(subUrl(server, 'gone'), { method: 'DELETE' })).status).toBe(204)
    const closing = server.close() // waits for the delivery in flight, its recording included
    servers.splice(servers.indexOf(server), 1)
    delivery.answer(200, { done: true })
    await closing
    expect(reports.map((r) => r.event)).not.toContain('subscriptions.delivery_failed')
  })
})

describe('pull-wake', () => {
  it('DSS11 claim, a second worker ALREADY_CLAIMED, heartbeat ack, done ack, NO_PENDING_WORK, release', async () => {
    const server = await serve({ subscriptions: { webhooks: false } })
    await createStream(server, 'wake/pool', [])
    await subscribe(server, 'pull', { type: 'pull-wake', pattern: 'jobs/*', wake_stream: 'wake/pool' })
    await createStream(server, 'jobs/1')
    await until(async () => ((await (await fetch(`${root(server)}wake/pool`)).json()) as unknown[]).length > 0)
    const events = (await (await fetch(`${root(server)}wake/pool`)).json()) as Array<Record<string, unknown>>
    expect(events[0]).toMatchObject({ type: 'wake', subscription_id: 'pull', stream: 'jobs/1' })
    const claim = await fetch(`${subUrl(server, 'pull')}/claim`, json('POST', { worker: 'w1' }))
    expect(claim.status).toBe(200)
    const claimed = (await claim.json()) as Record<string, any>
    expect(Object.keys(claimed).sort()).toEqual(['generation', 'lease_ttl_ms', 'streams', 'token', 'wake_id'])
    const busy = await fetch(`${subUrl(server, 'pull')}/claim`, json('POST', { worker: 'w2' }))
    expect(busy.status).toBe(409)
    expect(((await busy.json()) as any).error).toMatchObject({ code: 'ALREADY_CLAIMED', current_holder: 'w1', generation: claimed.generation })
    const auth = { authorization: `Bearer ${claimed.token}` }
    const base = { wake_id: claimed.wake_id, generation: claimed.generation }
    const beat = await fetch(`${subUrl(server, 'pull')}/ack`, json('POST', base, auth))
    expect(beat.status).toBe(200)
    const tail = claimed.streams[0].tail_offset
    const beyond = await fetch(`${subUrl(server, 'pull')}/ack`, json('POST', { ...base, acks: [{ stream: 'jobs/1', offset: '9999999999999999_9999999999999999' }] }, auth))
    expect(beyond.status).toBe(409)
    expect(((await beyond.json()) as any).error.code).toBe('INVALID_OFFSET')
    const done = await fetch(`${subUrl(server, 'pull')}/ack`, json('POST', { ...base, acks: [{ stream: 'jobs/1', offset: tail }], done: true }, auth))
    expect(await done.json()).toEqual({ ok: true, next_wake: false })
    const idle = await fetch(`${subUrl(server, 'pull')}/claim`, json('POST', { worker: 'w1' }))
    expect(idle.status).toBe(409)
    expect(((await idle.json()) as any).error.code).toBe('NO_PENDING_WORK')
    await fetch(`${root(server)}jobs/1`, json('POST', { more: true }))
    const again = (await (await fetch(`${subUrl(server, 'pull')}/claim`, json('POST', { worker: 'w2' }))).json()) as Record<string, any>
    const stale = await fetch(`${subUrl(server, 'pull')}/release`, json('POST', base, { authorization: `Bearer ${again.token}` }))
    expect(stale.status).toBe(409)
    expect(((await stale.json()) as any).error.code).toBe('FENCED')
    const wakes = async () => ((await (await fetch(`${root(server)}wake/pool`)).json()) as unknown[]).length
    const before = await wakes()
    const release = await fetch(`${subUrl(server, 'pull')}/release`, json('POST', { wake_id: again.wake_id, generation: again.generation }, { authorization: `Bearer ${again.token}` }))
    expect(release.status).toBe(204)
    await until(async () => (await wakes()) > before) // work is still pending: a new wake event
  })

  it('DSS17 a claimed lease that lapses without an ack is expired by the delivery loop and another worker can claim', async () => {
    const server = await serve()
    await createStream(server, 'wake/lapse', [])
    await subscribe(server, 'pull-lapse', { type: 'pull-wake', streams: ['jobs/2'], wake_stream: 'wake/lapse', lease_ttl_ms: 1000 })
    await createStream(server, 'jobs/2', [])
    await fetch(`${root(server)}jobs/2`, json('POST', { job: 1 }))
    await until(async () => ((await (await fetch(`${root(server)}wake/lapse`)).json()) as unknown[]).length > 0)
    const first = (await (await fetch(`${subUrl(server, 'pull-lapse')}/claim`, json('POST', { worker: 'w1' }))).json()) as Record<string, any>
    expect(first.token).toEqual(expect.any(String))
    let second: Record<string, any> = {}
    await until(async () => {
      const res = await fetch(`${subUrl(server, 'pull-lapse')}/claim`, json('POST', { worker: 'w2' }))
      second = (await res.json()) as Record<string, any>
      return res.status === 200
    })
    expect(second.generation).toBeGreaterThan(first.generation)
    const stale = await fetch(`${subUrl(server, 'pull-lapse')}/ack`, json('POST', { wake_id: first.wake_id, generation: first.generation, done: true }, {
      authorization: `Bearer ${first.token}`,
    }))
    expect([401, 409]).toContain(stale.status)
  })

  it('DSS12 claim refuses a webhook subscription (400) and a missing worker (400 INVALID_REQUEST)', async () => {
    const server = await serve({ subscriptions: { webhooks: false } })
    await subscribe(server, 'wh', { type: 'webhook', pattern: 'x/*', webhook: { url: 'http://localhost:9/h' } })
    const claim = await fetch(`${subUrl(server, 'wh')}/claim`, json('POST', { worker: 'w' }))
    expect(claim.status).toBe(400)
    expect(((await claim.json()) as any).error.code).toBe('INVALID_REQUEST')
    const noWorker = await fetch(`${subUrl(server, 'wh')}/claim`, json('POST', {}))
    expect(noWorker.status).toBe(400)
  })
})

describe('routes', () => {
  it('DSS13 CRUD, membership, conflicts, unknown ids and control paths, methods, and no secret in any view', async () => {
    const server = await serve({ subscriptions: { webhooks: false } })
    const config = { type: 'webhook', streams: ['m/a'], webhook: { url: 'http://127.0.0.1:9/h' }, description: 'd' }
    const created = await subscribe(server, 'crud/1', config)
    expect(Object.keys(created).sort()).toEqual(
      ['created_at', 'description', 'id', 'lease_ttl_ms', 'pattern', 'status', 'streams', 'subscription_id', 'type', 'wake_stream', 'webhook'])
    expect(Object.keys(created.webhook).sort()).toEqual(['signing', 'url'])
    expect((await fetch(subUrl(server, 'crud/1'), json('PUT', config))).status).toBe(200)
    const conflict = await fetch(subUrl(server, 'crud/1'), json('PUT', { ...config, description: 'other' }))
    expect(conflict.status).toBe(409)
    expect(((await conflict.json()) as any).error.code).toBe('SUBSCRIPTION_ALREADY_EXISTS')
    expect((await fetch(`${subUrl(server, 'crud/1')}/streams`, json('POST', { streams: ['m/b/c'] }))).status).toBe(204)
    expect((await fetch(`${subUrl(server, 'crud/1')}/streams`, json('POST', { streams: 'm/b' }))).status).toBe(400)
    expect((await view(server, 'crud/1')).streams.map((s: { path: string }) => s.path).sort()).toEqual(['m/a', 'm/b/c'])
    expect((await fetch(`${subUrl(server, 'crud/1')}/streams/m/b/c`, { method: 'DELETE' })).status).toBe(204)
    expect((await fetch(`${subUrl(server, 'crud/1')}/streams/${encodeURIComponent('m/a')}`, { method: 'DELETE' })).status).toBe(204)
    expect((await fetch(`${subUrl(server, 'crud/1')}/streams/${encodeURIComponent('m/a')}`, { method: 'DELETE' })).status).toBe(204)
    expect((await view(server, 'crud/1')).streams).toEqual([])
    const bad = await fetch(subUrl(server, 'crud/2'), { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{nope' })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as any).error.code).toBe('INVALID_REQUEST')
    const invalid = await fetch(subUrl(server, 'crud/2'), json('PUT', { type: 'webhook' }))
    expect(invalid.status).toBe(400)
    expect(((await invalid.json()) as any).error.code).toBe('INVALID_REQUEST')
    expect((await fetch(subUrl(server, 'crud/1'), { method: 'DELETE' })).status).toBe(204)
    const gone = await fetch(subUrl(server, 'crud/1'))
    expect(gone.status).toBe(404)
    expect(((await gone.json()) as any).error.code).toBe('SUBSCRIPTION_NOT_FOUND')
    expect((await fetch(subUrl(server, 'crud/1'), { method: 'DELETE' })).status).toBe(404)
    expect((await fetch(`${root(server)}__ds/other`)).status).toBe(404)
    expect((await fetch(`${root(server)}__ds`)).status).toBe(404)
    const method = await fetch(`${subUrl(server, 'x')}/claim`)
    expect(method.status).toBe(405)
    expect(method.headers.get('allow')).toContain('POST')
    expect(method.headers.get('x-content-type-options')).toBe('nosniff')
  })

  it('DSS14 authorize sees operation subscribe for control routes, never for callbacks or the JWKS; off by default; 503 once closed', async () => {
    const seen: string[] = []
    const server = await serve({
      subscriptions: { webhooks: false },
      authorize: (request, { path, operation }) => {
        seen.push(`${operation} ${path}`)
        return request.headers.get('authorization') === 'Bearer admin'
      },
    })
    const admin = { authorization: 'Bearer admin' }
    const denied = await fetch(subUrl(server, 'auth'), json('PUT', { type: 'pull-wake', streams: ['a'], wake_stream: 'w' }))
    expect(denied.status).toBe(401)
    expect(((await denied.json()) as any).error.code).toBe('TOKEN_INVALID')
    expect(seen).toEqual(['subscribe __ds/subscriptions/auth'])
    expect((await fetch(`${root(server)}__ds/jwks.json`)).status).toBe(200)
    const callback = await fetch(`${subUrl(server, 'auth')}/callback`, json('POST', { wake_id: 'w', generation: 1 }, { authorization: 'Bearer admin' }))
    expect(callback.status).toBe(404) // no such subscription: the token, not authorize, is the gate
    expect(seen).toHaveLength(1)
    expect((await fetch(subUrl(server, 'auth'), { headers: admin })).status).toBe(404)
    expect(seen.at(-1)).toBe('subscribe __ds/subscriptions/auth')

    const off = await serve({ subscriptions: undefined })
    expect((await fetch(`${root(off)}__ds/jwks.json`)).status).toBe(404)
    const closing = await serve({ subscriptions: { webhooks: false } })
    await closing.handler.close()
    expect((await fetch(`${root(closing)}__ds/jwks.json`)).status).toBe(503)
  })

  it('DSS18 a request authorize refused does not lend its Host to callback URLs', async () => {
    const hook = await receiver()
    const server = await serve({ authorize: (request) => request.headers.get('authorization') === 'Bearer admin' })
    const admin = { authorization: 'Bearer admin' }
    const put = await fetch(subUrl(server, 'host/1'), json('PUT', { type: 'webhook', streams: ['h/a'], webhook: { url: hook.url } }, admin))
    expect(put.status).toBe(201)
    const forged = (path: string) => new Promise<number>((resolve, reject) => {
      const req = http.request(`${root(server)}${path}`, { headers: { host: 'evil.example:1' } }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on('error', reject)
      req.end()
    })
    expect(await forged('h/a')).toBe(401)
    expect(await forged('__ds/subscriptions/host%2F1')).toBe(401)
    await pool.query(`SELECT sandbox_persist.stream_create('h/a', 'application/json', NULL, convert_to('{"e":1}', 'UTF8'))`)
    const wake = await hook.nth(1)
    expect(wake.body.callback_url).toBe(`${root(server)}__ds/subscriptions/host%2F1/callback`)
  })

  it('DSS15 the CLI takes --public-url (default with --insecure-local: its own loopback address) and --webhook-signing-key', () => {
    const base = ['--database-url', 'u', '--port', '1', '--insecure-local']
    const config = parseCliArgs([...base, '--public-url', 'https://s.example', '--webhook-signing-key', '/k.pem'], {})
    expect(config).toMatchObject({ publicUrl: 'https://s.example', webhookSigningKey: '/k.pem' })
    expect(() => parseCliArgs([...base, '--public-url', 'ftp://x'], {})).toThrow(/--public-url/)
    expect(parseCliArgs(base, {}).publicUrl).toBe('http://127.0.0.1:1')
    expect(parseCliArgs([...base, '--host', '::1'], {}).publicUrl).toBe('http://[::1]:1')
    expect(parseCliArgs(['--database-url', 'u', '--port', '1', '--token', 't'], {}).publicUrl).toBeUndefined()
  })
})
