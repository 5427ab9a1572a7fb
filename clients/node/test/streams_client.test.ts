/**
 * The official Durable Streams client (@durable-streams/client) against
 * serveStreams on the test database (docs/contract/streams.md §6): what the
 * conformance suite checks request by request, checked here the way an
 * application uses the protocol — an idempotent producer writing, catch-up,
 * long-poll and SSE readers tailing, a reader resuming from its saved offset,
 * a fenced zombie producer, and a close that ends live readers.
 *
 * The server runs with short long-poll and SSE lifetimes so that every live
 * test also crosses the client's reconnect paths (a long-poll answered 204, an
 * SSE connection ended by the server and reopened at the last offset).
 */
import {
  DurableStream,
  FetchError,
  IdempotentProducer,
  StaleEpochError,
  StreamClosedError,
  stream,
  type JsonBatch,
  type LiveMode,
  type StreamResponse,
} from '@durable-streams/client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { serveStreams, type StreamServer } from '../src/index.js'
import { makePool, reset, sleep, until } from './helpers.js'

interface Msg {
  n: number
  text: string
}

const pool = makePool({ max: 16 })
let server: StreamServer

/** Every request the client made (method, URL, status): proves which live mode carried the data. */
const requests: Array<{ method: string; url: string; status: number }> = []
const recordingFetch: typeof fetch = async (input, init) => {
  const response = await fetch(input, init)
  const url = input instanceof Request ? input.url : String(input)
  requests.push({ method: init?.method ?? (input instanceof Request ? input.method : 'GET'), url, status: response.status })
  return response
}

beforeAll(async () => {
  await reset(pool)
  server = await serveStreams({ pool, port: 0, host: '127.0.0.1', longPollTimeoutMs: 700, sseLifetimeMs: 1500, sseHeartbeatMs: 300 })
})

afterAll(async () => {
  await server?.close()
})

const urlOf = (name: string) => `${server.url}/v1/stream/client/${name}`
const messages = (count: number, from = 0): Msg[] =>
  Array.from({ length: count }, (_, i) => ({ n: from + i, text: `message ${from + i} ${'é✓'.repeat((from + i) % 3)}` }))

async function createJson(name: string): Promise<DurableStream> {
  return DurableStream.create({ url: urlOf(name), contentType: 'application/json', fetch: recordingFetch })
}

/** HEAD of a stream that must exist. */
async function tail(handle: DurableStream) {
  const head = await handle.head()
  if (!head.exists) throw new Error(`${handle.url} does not exist`)
  return head
}

/** A producer whose batch errors are collected rather than lost. */
function producer(handle: DurableStream, id: string, opts: { epoch?: number; autoClaim?: boolean } = {}) {
  const errors: Error[] = []
  const p = new IdempotentProducer(handle, id, { ...opts, lingerMs: 2, fetch: recordingFetch, onError: (e) => errors.push(e) })
  return { p, errors }
}

/** Append `items` in `groups` flushed groups with a pause between them: a writer producing over time. */
async function writeOverTime(p: IdempotentProducer, items: Msg[], groups: number, pauseMs: number): Promise<void> {
  const size = Math.ceil(items.length / groups)
  for (let i = 0; i < items.length; i += size) {
    for (const item of items.slice(i, i + size)) p.append(JSON.stringify(item))
    await p.flush()
    await sleep(pauseMs)
  }
}

/** A live reader collecting every JSON batch it is handed. */
function collect(res: StreamResponse<Msg>) {
  const items: Msg[] = []
  const batches: Array<JsonBatch<Msg>> = []
  res.subscribeJson(async (batch) => {
    batches.push(batch)
    items.push(...batch.items)
  })
  return { items, batches }
}

const liveRequests = (name: string, mode: string) =>
  requests.filter((r) => r.method === 'GET' && r.url.includes(`/client/${name}?`) && r.url.includes(`live=${mode}`))

describe('Durable Streams client against serveStreams', () => {
  it('DSC1: an idempotent producer writes a JSON stream and a catch-up read returns exactly its messages', async () => {
    const handle = await createJson('dsc1')
    expect(handle.contentType).toBe('application/json')
    const { p, errors } = producer(handle, 'writer-dsc1')
    const written = messages(200)
    for (const m of written) p.append(JSON.stringify(m))
    await p.flush()
    await p.detach()
    expect(errors).toEqual([])
    // Batching and pipelining happened (fewer POSTs than messages), and each was acknowledged 200.
    const posts = requests.filter((r) => r.method === 'POST' && r.url.endsWith('/client/dsc1'))
    expect(posts.length).toBeGreaterThan(0)
    expect(posts.length).toBeLessThan(written.length)
    expect(posts.every((r) => r.status === 200)).toBe(true)

    const res = await stream<Msg>({ url: urlOf('dsc1'), live: false, fetch: recordingFetch })
    expect(await res.json()).toEqual(written)
    expect(res.upToDate).toBe(true)
    expect(res.streamClosed).toBe(false)
    expect(res.offset).toBe((await tail(handle)).offset)

    // Reading again from the tail offset returns nothing; from the start, everything again.
    expect(await (await stream<Msg>({ url: urlOf('dsc1'), offset: res.offset, live: false })).json()).toEqual([])
    expect(await (await handle.stream<Msg>({ live: false })).json()).toEqual(written)

    // DurableStream.append (the plain, batching writer) lands after the producer's messages.
    await Promise.all([handle.append(JSON.stringify({ n: 200, text: 'plain' })), handle.append(JSON.stringify({ n: 201, text: 'plain' }))])
    const all = await (await handle.stream<Msg>({ live: false })).json()
    expect(all).toEqual([...written, { n: 200, text: 'plain' }, { n: 201, text: 'plain' }])
  })

  it('DSC2: a producer batch resent with the same (id, epoch, seq) is stored once (the duplicate is answered 204)', async () => {
    // The producer's exactly-once promise is the server's: resend the same (id, epoch, seq) by hand.
    const handle = await createJson('dsc2')
    const { p, errors } = producer(handle, 'writer-dsc2')
    p.append(JSON.stringify({ n: 0, text: 'once' }))
    await p.flush()
    const again = await fetch(urlOf('dsc2'), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Producer-Id': 'writer-dsc2', 'Producer-Epoch': '0', 'Producer-Seq': '0' },
      body: '[{"n":0,"text":"once"}]',
    })
    expect(again.status).toBe(204)
    p.append(JSON.stringify({ n: 1, text: 'twice?' }))
    await p.flush()
    expect(errors).toEqual([])
    expect(await (await handle.stream<Msg>({ live: false })).json()).toEqual([
      { n: 0, text: 'once' },
      { n: 1, text: 'twice?' },
    ])
  })

  for (const [id, mode] of [
    ['DSC3', 'long-poll'],
    ['DSC4', 'sse'],
  ] as const) {
    it(`${id}: a ${mode} reader started before the writes receives every later message, in order, once`, async () => {
      const name = `live-${mode}`
      const handle = await createJson(name)
      const before = messages(5)
      const { p, errors } = producer(handle, `writer-${name}`)
      for (const m of before) p.append(JSON.stringify(m))
      await p.flush()

      const res = await stream<Msg>({ url: urlOf(name), live: mode, fetch: recordingFetch })
      const got = collect(res)
      // The reader has caught up and waits on the server before anything else is written.
      await until(() => got.items.length === before.length && server.handler.liveReaders >= 1)

      const after = messages(60, before.length)
      await writeOverTime(p, after, 12, 120)
      await until(() => got.items.length >= before.length + after.length)
      await sleep(300) // anything extra (a duplicate) would arrive now
      res.cancel()
      await p.detach()

      expect(errors).toEqual([])
      expect(got.items).toEqual([...before, ...after])
      // Batch offsets never go backwards, and the data arrived over the mode asked for.
      const offsets = got.batches.map((b) => b.offset)
      expect([...offsets].sort()).toEqual(offsets)
      const live = liveRequests(name, mode)
      expect(live.length).toBeGreaterThan(0)
      expect(live.every((r) => r.status === 200 || r.status === 204)).toBe(true)
      expect(liveRequests(name, mode === 'sse' ? 'long-poll' : 'sse')).toEqual([])
      if (mode === 'sse') {
        // The reads spanned more than one SSE connection (sseLifetimeMs 1500): the client reconnected at its offset.
        expect(live.length).toBeGreaterThan(1)
      }
    })
  }

  for (const [id, mode] of [
    ['DSC5', 'long-poll'],
    ['DSC6', 'sse'],
  ] as const) {
    it(`${id}: a ${mode} reader stopped mid-stream and resumed from its saved offset ends with exactly the messages written`, async () => {
      const name = `resume-${mode}`
      const handle = await createJson(name)
      const { p, errors } = producer(handle, `writer-${name}`)
      const written = messages(90)
      const writing = writeOverTime(p, written, 30, 60)

      // First session: checkpoint (items, offset) together per batch; stop after a third of the stream.
      const saved: { items: Msg[]; offset: string } = { items: [], offset: '-1' }
      let stopped = false
      const first = await stream<Msg>({ url: urlOf(name), live: mode as LiveMode, fetch: recordingFetch })
      first.subscribeJson(async (batch) => {
        if (stopped) return // a process that stopped hears nothing more
        saved.items = [...saved.items, ...batch.items]
        saved.offset = batch.offset
        if (saved.items.length >= 30) {
          stopped = true
          first.cancel()
        }
      })
      await until(() => stopped)
      await first.closed.catch(() => undefined)
      expect(saved.items.length).toBeLessThan(written.length) // stopped while the writer was still writing

      // Second session: from the saved offset only.
      const second = await stream<Msg>({ url: urlOf(name), offset: saved.offset, live: mode as LiveMode, fetch: recordingFetch })
      const got = collect(second)
      await writing
      await until(() => saved.items.length + got.items.length >= written.length)
      await sleep(300)
      second.cancel()
      await p.detach()

      expect(errors).toEqual([])
      expect([...saved.items, ...got.items]).toEqual(written)
      expect(got.batches.at(-1)?.offset).toBe((await tail(handle)).offset)
    })
  }

  it('DSC7: a producer with a stale epoch is fenced: the client surfaces the 403 as StaleEpochError', async () => {
    const handle = await createJson('dsc7')
    const zombie = producer(handle, 'shared-id', { epoch: 0 })
    zombie.p.append(JSON.stringify({ n: 0, text: 'zombie before' }))
    await zombie.p.flush()
    expect(zombie.errors).toEqual([])

    // A new instance of the same producer claims epoch 1.
    const fresh = producer(handle, 'shared-id', { epoch: 1 })
    fresh.p.append(JSON.stringify({ n: 1, text: 'fresh' }))
    await fresh.p.flush()
    expect(fresh.errors).toEqual([])

    // The old instance writes again: refused, nothing stored.
    zombie.p.append(JSON.stringify({ n: 2, text: 'zombie after' }))
    await zombie.p.flush()
    expect(zombie.errors).toHaveLength(1)
    const error = zombie.errors[0]!
    expect(error).toBeInstanceOf(StaleEpochError)
    expect((error as StaleEpochError).currentEpoch).toBe(1)
    const fenced = requests.filter((r) => r.method === 'POST' && r.url.endsWith('/client/dsc7') && r.status === 403)
    expect(fenced).toHaveLength(1)

    // autoClaim: a producer that is told its epoch is stale takes the next one and its write lands.
    const claimer = producer(handle, 'shared-id', { epoch: 0, autoClaim: true })
    claimer.p.append(JSON.stringify({ n: 3, text: 'claimed' }))
    await claimer.p.flush()
    expect(claimer.errors).toEqual([])
    expect(claimer.p.epoch).toBe(2)
    // ...which in turn fences the instance at epoch 1.
    fresh.p.append(JSON.stringify({ n: 4, text: 'fresh after claim' }))
    await fresh.p.flush()
    expect(fresh.errors.map((e) => (e as StaleEpochError).currentEpoch)).toEqual([2])

    expect(await (await handle.stream<Msg>({ live: false })).json()).toEqual([
      { n: 0, text: 'zombie before' },
      { n: 1, text: 'fresh' },
      { n: 3, text: 'claimed' },
    ])
  })

  for (const [id, mode] of [
    ['DSC8', 'long-poll'],
    ['DSC9', 'sse'],
  ] as const) {
    it(`${id}: closing the stream ends a live ${mode} reader, which sees streamClosed after the last message`, async () => {
      const name = `close-${mode}`
      const handle = await createJson(name)
      const { p, errors } = producer(handle, `writer-${name}`)
      const res = await stream<Msg>({ url: urlOf(name), live: mode, fetch: recordingFetch })
      const got = collect(res)
      await until(() => server.handler.liveReaders >= 1)

      const written = messages(10)
      for (const m of written) p.append(JSON.stringify(m))
      await p.flush()
      await until(() => got.items.length === written.length)
      const result = await p.close(JSON.stringify({ n: 10, text: 'last' }))
      expect(errors).toEqual([])

      // The reader's session ends by itself, promptly. (Client 0.2.7 resolves `closed` just before it hands
      // the subscriber the final batch, so wait for that batch too.)
      const ended = await Promise.race([res.closed.then(() => 'ended'), sleep(10_000).then(() => 'still open')])
      expect(ended).toBe('ended')
      await until(() => got.batches.some((b) => b.streamClosed), 5_000)
      expect(got.items).toEqual([...written, { n: 10, text: 'last' }])
      expect(res.streamClosed).toBe(true)
      expect(got.batches.at(-1)?.streamClosed).toBe(true)
      expect(got.batches.at(-1)?.offset).toBe(result.finalOffset)
      expect(server.handler.liveReaders).toBe(0)

      // Appends are refused from now on; HEAD and a new reader see the stream closed.
      // (Client 0.2.7's append reports the 409 as a FetchError from its retry wrapper before its own
      // Stream-Closed check could turn it into StreamClosedError: accept either, but insist on the header.)
      const refused = await handle.append(JSON.stringify({ n: 11, text: 'too late' })).then(
        () => undefined,
        (e: unknown) => e,
      )
      if (!(refused instanceof StreamClosedError)) {
        expect(refused).toBeInstanceOf(FetchError)
        expect((refused as FetchError).status).toBe(409)
        expect((refused as FetchError).headers['stream-closed']).toBe('true')
        expect((refused as FetchError).headers['stream-next-offset']).toBe(result.finalOffset)
      }
      // A producer's close is idempotent: closing again answers with the same final offset.
      const again = producer(handle, `other-${name}`)
      await expect(again.p.close()).resolves.toEqual({ finalOffset: result.finalOffset })
      expect((await tail(handle)).streamClosed).toBe(true)
      const late = await stream<Msg>({ url: urlOf(name), live: mode })
      expect(await late.json()).toEqual([...written, { n: 10, text: 'last' }])
      expect(late.streamClosed).toBe(true)
    })
  }
})
