/**
 * The adapter through an app's life, end to end over node:http with the
 * published @tanstack/ai and the README's route module shape (durability.start
 * for the POST, errors mapped with httpStatusOf, sseHeartbeats on both
 * responses):
 *   E22/L21  shutdown mid-stream drains: the open log ends with a
 *            SERVER_SHUTDOWN chunk a resumer on another replica receives, the
 *            run is marked failed, lock waiters get ADAPTER_CLOSED and holders
 *            release before the pool ends
 *   E23      a POST repeating the X-Run-Id of a finished (or streaming) run is
 *            a 409 and runs nothing
 *   E24      resume errors carry codes a route turns into 4xx
 *   E25      idle resumers get SSE comment heartbeats, offsets untouched
 */
import {
  chat,
  resumeServerSentEventsResponse,
  toServerSentEventsResponse,
  type ChatMiddleware,
  type DefaultMessageMetadataByModality,
  type ModelMessage,
  type StreamChunk,
  type TextAdapter,
} from '@tanstack/ai'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { performance } from 'node:perf_hooks'
import type pg from 'pg'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  DEFAULT_HEARTBEAT_MS,
  httpStatusOf,
  LockLostError,
  postgresDurability,
  postgresLocks,
  postgresPersistence,
  sseHeartbeats,
  type PostgresDurabilityFactory,
  type PostgresPersistenceStores,
} from '../src/index.js'
import { nodeHandler } from '../examples/node-http.js'
import { makePool, reset, rows, sleep } from './helpers.js'

const replicaB = makePool({ max: 4 })

beforeAll(async () => {
  await reset(replicaB)
})

const WORDS = Array.from({ length: 12 }, (_, i) => `w${i} `)

/** A scripted model that stops after `before` words until `gate` resolves; `ended` settles when its stream is closed. */
function gatedModel(
  before: number,
  gate: Promise<void>,
  ended: () => void = () => undefined,
): TextAdapter<'gated-1', Record<string, never>, readonly ['text'], DefaultMessageMetadataByModality> {
  return {
    kind: 'text',
    name: 'gated',
    model: 'gated-1',
    '~types': undefined as never,
    async *chatStream(options) {
      const runId = options.runId ?? 'run'
      const threadId = options.threadId ?? 'thread'
      const messageId = `${runId}-0`
      try {
        yield { type: 'RUN_STARTED', runId, threadId, timestamp: Date.now() } as StreamChunk
        yield { type: 'TEXT_MESSAGE_START', messageId, role: 'assistant', timestamp: Date.now() } as StreamChunk
        for (const [i, delta] of WORDS.entries()) {
          if (i === before) await gate
          yield { type: 'TEXT_MESSAGE_CONTENT', messageId, delta, timestamp: Date.now() } as StreamChunk
        }
        yield { type: 'TEXT_MESSAGE_END', messageId, timestamp: Date.now() } as StreamChunk
        yield { type: 'RUN_FINISHED', runId, threadId, finishReason: 'stop', timestamp: Date.now() } as StreamChunk
      } finally {
        ended()
      }
    },
    async structuredOutput() {
      throw new Error('structured output is not scripted')
    },
  }
}

/** Run bookkeeping as the README's saveTranscript does it. */
function saveTranscript(s: PostgresPersistenceStores): ChatMiddleware {
  return {
    name: 'save-transcript',
    async onStart(ctx) {
      await s.runs.createOrResume({ runId: ctx.runId, threadId: ctx.threadId, startedAt: Date.now() })
    },
    async onFinish(ctx) {
      await s.messages.saveThread(ctx.threadId, [...ctx.messages])
      await s.runs.update(ctx.runId, { status: 'completed', finishedAt: Date.now() })
    },
  }
}

/** The README's error mapping: coded adapter errors become 4xx/503 with the code in the body. */
function errorResponse(error: unknown): Response {
  const status = httpStatusOf(error)
  if (status === undefined) throw error
  const { code, message } = error as { code: string; message: string }
  return Response.json({ code, message }, { status })
}

interface App {
  base: string
  server: http.Server
  stop: () => Promise<void>
}

/** One replica: the README's route module on node:http (127.0.0.1, a free port). */
async function startApp(options: {
  pool: pg.Pool
  durability: PostgresDurabilityFactory
  model: () => TextAdapter<'gated-1', Record<string, never>, readonly ['text'], DefaultMessageMetadataByModality>
  heartbeatMs?: number
}): Promise<App> {
  const { stores } = postgresPersistence(options.pool)
  const heartbeat = { intervalMs: options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS }
  const server = http.createServer(
    nodeHandler(async (request) => {
      if (request.method === 'POST') {
        const { threadId, messages } = (await request.json()) as { threadId: string; messages: Array<ModelMessage> }
        let log
        try {
          log = await options.durability.start(request)
        } catch (error) {
          return errorResponse(error)
        }
        const history = await stores.messages.loadThread(threadId)
        const stream = chat({
          adapter: options.model(),
          messages: [...history, ...messages],
          threadId,
          runId: log.runId,
          middleware: [saveTranscript(stores)],
        })
        return sseHeartbeats(
          toServerSentEventsResponse(stream, { headers: { 'X-Run-Id': log.runId }, durability: { adapter: log, batch: 1 } }),
          heartbeat,
        )
      }
      try {
        return sseHeartbeats(resumeServerSentEventsResponse({ adapter: options.durability(request) }), heartbeat)
      } catch (error) {
        return errorResponse(error)
      }
    }),
  )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/chat`
  const stop = async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  return { base, server, stop }
}

interface Sse {
  events: Array<{ id?: string; data: StreamChunk; at: number }>
  comments: Array<{ text: string; at: number; afterEvents: number }>
  done: Promise<void>
  /** Resolves when `n` events have arrived. */
  events_(n: number): Promise<void>
  /** Resolves when `n` comments have arrived. */
  comments_(n: number): Promise<void>
  cancel: () => Promise<void>
}

/** Read an SSE body incrementally, keeping events and comment lines with their arrival times. */
function readSse(body: ReadableStream<Uint8Array>): Sse {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  const sse = { events: [], comments: [] } as unknown as Sse
  const waiters: Array<() => void> = []
  const changed = () => waiters.splice(0).forEach((w) => w())
  const until = (ok: () => boolean) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (ok()) resolve()
        else if (finished) reject(new Error(`the stream ended first (${sse.events.length} events, ${sse.comments.length} comments)`))
        else waiters.push(check)
      }
      check()
    })
  let finished = false
  sse.events_ = (n) => until(() => sse.events.length >= n)
  sse.comments_ = (n) => until(() => sse.comments.length >= n)
  sse.cancel = () => reader.cancel().catch(() => undefined)
  sse.done = (async () => {
    let buffer = ''
    try {
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        buffer += decoder.decode(value, { stream: true })
        let boundary: number
        while ((boundary = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, boundary)
          buffer = buffer.slice(boundary + 2)
          const event: { id?: string; data?: StreamChunk } = {}
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) sse.comments.push({ text: line.slice(1).trim(), at: performance.now(), afterEvents: sse.events.length })
            else if (line.startsWith('id: ')) event.id = line.slice(4)
            else if (line.startsWith('data: ')) event.data = JSON.parse(line.slice(6)) as StreamChunk
          }
          if (event.data !== undefined) sse.events.push({ ...event, data: event.data, at: performance.now() })
          changed()
        }
      }
    } catch {
      // cancelled or the connection dropped: the events so far stand
    } finally {
      finished = true
      changed()
    }
  })()
  return sse
}

const post = (base: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(base, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) })

async function waitForStatus(stores: PostgresPersistenceStores, runId: string, status: string) {
  let record = await stores.runs.get(runId)
  for (let i = 0; i < 400 && record?.status !== status; i++) {
    await sleep(25)
    record = await stores.runs.get(runId)
  }
  return record
}

describe('an app through its life', () => {
  const opened: Array<() => Promise<void>> = []
  afterAll(async () => {
    for (const stop of opened.splice(0)) await stop().catch(() => undefined)
  })

  it('E23 a POST that repeats the X-Run-Id of a finished run is a 409 RUN_ALREADY_FINISHED and runs nothing; of a streaming run RUN_ALREADY_STARTED', async () => {
    const durability = postgresDurability(replicaB)
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    let gated = false
    const app = await startApp({ pool: replicaB, durability, model: () => gatedModel(gated ? 3 : 99, gated ? gate : Promise.resolve()) })
    opened.push(app.stop, durability.close)
    const { stores } = postgresPersistence(replicaB)

    const first = await post(app.base, { threadId: 'e23-thread', messages: [{ role: 'user', content: 'hello' }] }, { 'X-Run-Id': 'e23-run' })
    expect(first.status).toBe(200)
    const firstSse = readSse(first.body!)
    await firstSse.done
    expect(firstSse.events.at(-1)!.data).toMatchObject({ type: 'RUN_FINISHED' })
    expect((await waitForStatus(stores, 'e23-run', 'completed'))?.status).toBe('completed')
    const logBefore = await durability('e23-run').snapshot()

    // The client sends the run id back on its next POST.
    const again = await post(app.base, { threadId: 'e23-thread', messages: [{ role: 'user', content: 'hello' }] }, { 'X-Run-Id': 'e23-run' })
    expect(again.status).toBe(409)
    expect(await again.json()).toMatchObject({ code: 'RUN_ALREADY_FINISHED' })
    const logAfter = await durability('e23-run').snapshot()
    expect(logAfter).toEqual(logBefore)
    expect(logAfter.filter((e) => e.chunk.type === 'RUN_STARTED')).toHaveLength(1)
    expect((await stores.messages.loadThread('e23-thread')).map((m) => m.role)).toEqual(['user', 'assistant'])

    // Without the id (or with a new one) the next message is a new run.
    const next = await post(app.base, { threadId: 'e23-thread', messages: [{ role: 'user', content: 'again' }] })
    expect(next.status).toBe(200)
    const nextRun = next.headers.get('x-run-id')!
    expect(nextRun).not.toBe('e23-run')
    await readSse(next.body!).done

    // A run still streaming: repeating its id is refused too (resume it instead).
    gated = true
    const live = await post(app.base, { threadId: 'e23-live', messages: [{ role: 'user', content: 'hi' }] }, { 'X-Run-Id': 'e23-live-run' })
    const liveSse = readSse(live.body!)
    await liveSse.events_(2)
    const dup = await post(app.base, { threadId: 'e23-live', messages: [{ role: 'user', content: 'hi' }] }, { 'X-Run-Id': 'e23-live-run' })
    expect(dup.status).toBe(409)
    expect(await dup.json()).toMatchObject({ code: 'RUN_ALREADY_STARTED' })
    open()
    await liveSse.done
    expect(liveSse.events.filter((e) => e.data.type === 'RUN_STARTED')).toHaveLength(1)
  })

  it('E24 resume errors carry a code the route answers with 4xx: no run id, an empty or CR/LF run id, a malformed offset', async () => {
    const durability = postgresDurability(replicaB)
    const app = await startApp({ pool: replicaB, durability, model: () => gatedModel(99, Promise.resolve()) })
    opened.push(app.stop, durability.close)

    const noRun = await fetch(app.base, { headers: { 'Last-Event-ID': `v1.${'0'.repeat(12)}.1` } })
    expect(noRun.status).toBe(400)
    expect(await noRun.json()).toMatchObject({ code: 'RUN_ID_REQUIRED' })
    const empty = await fetch(`${app.base}?runId=`, { headers: { 'Last-Event-ID': `v1.${'0'.repeat(12)}.1` } })
    expect(empty.status).toBe(400)
    expect(await empty.json()).toMatchObject({ code: 'INVALID_RUN_ID' })
    const crlf = await fetch(`${app.base}?runId=a%0Ab&offset=-1`)
    expect(crlf.status).toBe(400)
    expect(await crlf.json()).toMatchObject({ code: 'INVALID_RUN_ID' })
    const garbage = await fetch(`${app.base}?runId=e24-run`, { headers: { 'Last-Event-ID': 'garbage' } })
    expect(garbage.status).toBe(400)
    expect(await garbage.json()).toMatchObject({ code: 'EVENT_LOG_INVALID_OFFSET' })

    // The factory's own throws, as a route sees them.
    for (const source of ['', { runId: '' }, 'a\nb']) {
      const error = (() => {
        try {
          durability(source)
        } catch (e) {
          return e as { code?: string }
        }
        return undefined
      })()
      expect(error?.code).toBe('INVALID_RUN_ID')
      expect(httpStatusOf(error)).toBe(400)
    }
    expect(httpStatusOf(new Error('a bug'))).toBeUndefined()
    // Ids from a request body: refused by the adapter (a TypeError with a code) or by the server (class 22).
    const { stores } = postgresPersistence(replicaB)
    const notString = await stores.messages.loadThread(42 as never).catch((e: unknown) => e)
    expect(notString).toBeInstanceOf(TypeError)
    expect(httpStatusOf(notString)).toBe(400)
    const tooLong = await stores.messages.loadThread('x'.repeat(2_000)).catch((e: unknown) => e)
    expect((tooLong as { sqlstate?: string }).sqlstate).toBe('22001')
    expect(httpStatusOf(tooLong)).toBe(400)
  })

  it('E25 an idle resumer gets SSE comment heartbeats at the interval; offsets and chunks are untouched', async () => {
    const durability = postgresDurability(replicaB)
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    // An injected interval: 40 ms instead of the 15 s default.
    const app = await startApp({ pool: replicaB, durability, model: () => gatedModel(3, gate), heartbeatMs: 40 })
    opened.push(app.stop, durability.close)
    expect(DEFAULT_HEARTBEAT_MS).toBeLessThanOrEqual(15_000)

    const produced = readSse((await post(app.base, { threadId: 'e25', messages: [{ role: 'user', content: 'x' }] }, { 'X-Run-Id': 'e25-run' })).body!)
    await produced.events_(2 + 1 + 3) // run.accepted, RUN_STARTED, START, three words
    const lastSeen = produced.events[5]!.id!
    const resumed = readSse((await fetch(`${app.base}?runId=e25-run`, { headers: { 'Last-Event-ID': lastSeen } })).body!)
    // Nothing new exists: the resumer's only bytes are heartbeats (three of them, then the model goes on).
    await resumed.comments_(3)
    expect(resumed.events).toEqual([])
    expect(resumed.comments.every((c) => c.text === 'heartbeat')).toBe(true)
    open()
    await resumed.done
    await produced.done
    const log = await durability('e25-run').snapshot()
    expect(resumed.events.map((e) => e.id)).toEqual(log.slice(6).map((e) => e.offset))
    expect(resumed.events.map((e) => e.data)).toEqual(log.slice(6).map((e) => e.chunk))
    expect(resumed.events.at(-1)!.data).toMatchObject({ type: 'RUN_FINISHED' })
  })

  it('E25 a heartbeat never splits an event (fake timers, no I/O)', async () => {
    vi.useFakeTimers()
    try {
      const encoder = new TextEncoder()
      let push!: (text: string | null) => void
      const source = new ReadableStream<Uint8Array>({
        start(controller) {
          push = (text) => (text === null ? controller.close() : controller.enqueue(encoder.encode(text)))
        },
      })
      const wrapped = sseHeartbeats(new Response(source, { headers: { 'Content-Type': 'text/event-stream' } }), { intervalMs: 1_000 })
      const reader = wrapped.body!.getReader()
      const decoder = new TextDecoder()
      const out: string[] = []
      const pump = (async () => {
        for (;;) {
          const { value, done } = await reader.read()
          if (done) return
          out.push(decoder.decode(value))
        }
      })()
      await vi.advanceTimersByTimeAsync(2_500)
      expect(out).toEqual([': heartbeat\n\n', ': heartbeat\n\n'])
      push('id: 1\ndata: {"a":') // half an event, then silence
      await vi.advanceTimersByTimeAsync(5_000)
      expect(out.slice(2)).toEqual(['id: 1\ndata: {"a":'])
      push('1}\n\n')
      await vi.advanceTimersByTimeAsync(1_000)
      expect(out.slice(3)).toEqual(['1}\n\n', ': heartbeat\n\n'])
      push(null)
      await vi.advanceTimersByTimeAsync(0)
      await pump
      // A 400 (not an event stream) passes through untouched.
      const plain = new Response('no offset', { status: 400 })
      expect(sseHeartbeats(plain)).toBe(plain)
    } finally {
      vi.useRealTimers()
    }
  })

  it('E22 L21 shutdown mid-stream: the open log ends with SERVER_SHUTDOWN (seen by a resumer on another replica), the run is failed, lock waiters get ADAPTER_CLOSED, holders release before pool.end()', async () => {
    const replicaA = makePool({ max: 4 })
    const durableA = postgresDurability(replicaA, { logger: { warn: () => undefined } })
    const locksA = postgresLocks(replicaA, { closeTimeoutMs: 300, minPollMs: 50 })
    const durableB = postgresDurability(replicaB)
    opened.push(durableB.close)
    let modelEnded!: () => void
    const modelGone = new Promise<void>((resolve) => (modelEnded = resolve))
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    const app = await startApp({ pool: replicaA, durability: durableA, model: () => gatedModel(4, gate, modelEnded) })
    const { stores } = postgresPersistence(replicaB)

    // Replica A streams a run; its client is still connected.
    const producer = readSse((await post(app.base, { threadId: 'e22', messages: [{ role: 'user', content: 'x' }] }, { 'X-Run-Id': 'e22-run' })).body!)
    await producer.events_(2 + 1 + 4)
    const lastSeen = producer.events.at(-1)!.id!
    expect((await stores.runs.get('e22-run'))?.status).toBe('running')
    // A resumer on replica B, parked after what its client saw.
    const resumer = readSse(resumeServerSentEventsResponse({ adapter: durableB({ runId: 'e22-run', offset: lastSeen }) }).body!)

    // Replica A holds two locks and has a waiter on one of them.
    let holding = 0
    let finishHolder!: () => void
    const holderMayFinish = new Promise<void>((resolve) => (finishHolder = resolve))
    const entered = () => holding++
    const holder = locksA.withLock('e22-lock-a', async () => {
      entered()
      await holderMayFinish
      return 'finished'
    })
    const stuckReason = locksA.withLock('e22-lock-b', async (signal) => {
      entered()
      // Never finishes on its own: only the store's close deadline ends it.
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }))
      return signal.reason as unknown
    })
    while (holding < 2) await sleep(10)
    const waiter = locksA.withLock('e22-lock-a', async () => 'should not run')
    const waited = waiter.then(
      () => expect.fail('the waiter ran'),
      (error: unknown) => error as { code?: string },
    )

    // SIGTERM: stop accepting, drain, then end the pool (README order).
    const t0 = performance.now()
    app.server.close()
    const drained = Promise.all([durableA.close(), locksA.close()])
    finishHolder()
    await drained
    await replicaA.end()
    app.server.closeAllConnections()

    // The resumer on B gets the terminal chunk and its stream ends.
    await resumer.done
    const terminal = resumer.events.at(-1)
    expect(terminal?.data).toMatchObject({ type: 'RUN_ERROR', code: 'SERVER_SHUTDOWN' })
    expect(typeof terminal?.id).toBe('string')
    console.log(`E22 shutdown -> a resumer's terminal chunk on another replica: ${(terminal!.at - t0).toFixed(0)} ms`)

    // The log is closed behind that chunk; the run is failed with the same code.
    const closed = await rows<{ r: { closed: boolean } }>(replicaB, `SELECT sandbox_persist.event_log_read('e22-run', 0, 0) AS r`)
    expect(closed[0]!.r.closed).toBe(true)
    const record = await stores.runs.get('e22-run')
    expect(record).toMatchObject({ status: 'failed', error: { code: 'SERVER_SHUTDOWN' } })
    const log = await durableB('e22-run').snapshot()
    expect(log.at(-1)!.chunk).toMatchObject({ type: 'RUN_ERROR', code: 'SERVER_SHUTDOWN' })

    // Locks: the waiter got ADAPTER_CLOSED, the holder finished, the stuck holder was aborted; both keys are free.
    expect((await waited).code).toBe('ADAPTER_CLOSED')
    expect(await holder).toBe('finished')
    const reason = await stuckReason
    expect(reason).toBeInstanceOf(LockLostError)
    expect((reason as LockLostError).why).toBe('closed')
    const probe = postgresLocks(replicaB, { acquireTimeoutMs: 0 })
    for (const key of ['e22-lock-a', 'e22-lock-b']) expect(await probe.withLock(key, async () => key)).toBe(key)
    await probe.close()

    // The model goes on after the shutdown: nothing is appended after the terminal chunk.
    open()
    await modelGone
    expect(await durableB('e22-run').snapshot()).toEqual(log)
    await app.stop().catch(() => undefined)
  })
})
