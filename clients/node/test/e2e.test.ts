/**
 * End to end with the published @tanstack/ai: a chat() run driven by a
 * scripted offline text adapter streams over SSE with postgresDurability as its
 * durable log; the consumer disconnects part-way; a second pool (another
 * "replica") resumes from the last offset it saw and receives the remainder
 * exactly once. The run is recorded in the runs store, and the run-driver lock
 * serialises two drivers.
 */
import {
  chat,
  replayRunStream,
  resumeServerSentEventsResponse,
  toServerSentEventsResponse,
  type ChatMiddleware,
  type DefaultMessageMetadataByModality,
  type StreamChunk,
  type TextAdapter,
} from '@tanstack/ai'
import { withLocks } from '@tanstack/ai/locks'
import { beforeAll, describe, expect, it } from 'vitest'
import { postgresDurability, postgresLocks, postgresPersistence } from '../src/index.js'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { nodeHandler } from '../examples/node-http.js'
import { countingPool, makePool, reset, sleep, until } from './helpers.js'

// Two replicas: separate pools (and separate adapter instances) on one database.
const replicaA = makePool({ max: 4 })
const replicaB = makePool({ max: 4 })

beforeAll(async () => {
  await reset(replicaA)
})

const SCRIPT = Array.from({ length: 30 }, (_, i) => `w${i} `)

/** A tiny offline TextAdapter that yields a scripted AG-UI stream. */
function scriptedAdapter(delayMs: number): TextAdapter<'scripted-1', Record<string, never>, readonly ['text'], DefaultMessageMetadataByModality> {
  return {
    kind: 'text',
    name: 'scripted',
    model: 'scripted-1',
    '~types': undefined as never,
    async *chatStream(options) {
      const runId = options.runId ?? 'run'
      const threadId = options.threadId ?? 'thread'
      const messageId = `${runId}-0`
      yield { type: 'RUN_STARTED', runId, threadId, timestamp: Date.now() } as StreamChunk
      yield { type: 'TEXT_MESSAGE_START', messageId, role: 'assistant', timestamp: Date.now() } as StreamChunk
      for (const delta of SCRIPT) {
        await sleep(delayMs)
        yield { type: 'TEXT_MESSAGE_CONTENT', messageId, delta, timestamp: Date.now() } as StreamChunk
      }
      yield { type: 'TEXT_MESSAGE_END', messageId, timestamp: Date.now() } as StreamChunk
      yield { type: 'RUN_FINISHED', runId, threadId, finishReason: 'stop', timestamp: Date.now() } as StreamChunk
    },
    async structuredOutput() {
      throw new Error('structured output is not scripted')
    },
  }
}

/** Records the run and the transcript the way withPersistence does (its package is not published). */
function recordRun(stores: ReturnType<typeof postgresPersistence>['stores']): ChatMiddleware {
  return {
    name: 'record-run',
    async onStart(ctx) {
      await stores.runs.createOrResume({ runId: ctx.runId, threadId: ctx.threadId, startedAt: Date.now() })
    },
    async onFinish(ctx) {
      // ctx.messages already ends with the assistant's reply: save it once.
      await stores.messages.saveThread(ctx.threadId, [...ctx.messages])
      await stores.runs.update(ctx.runId, { status: 'completed', finishedAt: Date.now() })
    },
  }
}

/** The transcript as role and content only (chat() adds ids and timestamps). */
async function transcriptOf(stores: ReturnType<typeof postgresPersistence>['stores'], threadId: string) {
  return (await stores.messages.loadThread(threadId)).map((m) => ({ role: m.role, content: m.content }))
}

/** Like scriptedAdapter, but it stops after `before` words until `gate` resolves. */
function gatedAdapter(before: number, gate: Promise<void>): TextAdapter<'gated-1', Record<string, never>, readonly ['text'], DefaultMessageMetadataByModality> {
  return {
    kind: 'text',
    name: 'gated',
    model: 'gated-1',
    '~types': undefined as never,
    async *chatStream(options) {
      const runId = options.runId ?? 'run'
      const threadId = options.threadId ?? 'thread'
      const messageId = `${runId}-0`
      yield { type: 'RUN_STARTED', runId, threadId, timestamp: Date.now() } as StreamChunk
      yield { type: 'TEXT_MESSAGE_START', messageId, role: 'assistant', timestamp: Date.now() } as StreamChunk
      for (const [i, delta] of SCRIPT.entries()) {
        if (i === before) await gate
        yield { type: 'TEXT_MESSAGE_CONTENT', messageId, delta, timestamp: Date.now() } as StreamChunk
        await sleep(5)
      }
      yield { type: 'TEXT_MESSAGE_END', messageId, timestamp: Date.now() } as StreamChunk
      yield { type: 'RUN_FINISHED', runId, threadId, finishReason: 'stop', timestamp: Date.now() } as StreamChunk
    },
    async structuredOutput() {
      throw new Error('structured output is not scripted')
    },
  }
}

interface SseEvent {
  id?: string
  data: StreamChunk
}

/** Incremental SSE parsing of a Response body; stops (disconnects) after `limit` events. */
async function readEvents(response: Response, limit = Infinity): Promise<SseEvent[]> {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  const events: SseEvent[] = []
  let buffer = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    buffer += decoder.decode(value, { stream: true })
    let boundary: number
    while ((boundary = buffer.indexOf('\n\n')) !== -1) {
      const block = buffer.slice(0, boundary)
      buffer = buffer.slice(boundary + 2)
      const event: Partial<SseEvent> = {}
      for (const line of block.split('\n')) {
        if (line.startsWith('id: ')) event.id = line.slice(4)
        else if (line.startsWith('data: ')) event.data = JSON.parse(line.slice(6)) as StreamChunk
      }
      if (event.data !== undefined) events.push(event as SseEvent)
      if (events.length >= limit) {
        await reader.cancel() // the browser tab closes
        return events
      }
    }
  }
  return events
}

describe('end to end with @tanstack/ai', () => {
  it('a chat() run over SSE survives a disconnect and resumes on another replica exactly once', async () => {
    const storesA = postgresPersistence(replicaA).stores
    const storesB = postgresPersistence(replicaB).stores
    const durableA = postgresDurability(replicaA)
    const durableB = postgresDurability(replicaB)
    const locksA = postgresLocks(replicaA)
    const runId = 'e2e-run-1'
    const threadId = 'e2e-thread'

    // Replica A: the POST handler.
    async function post(request: Request): Promise<Response> {
      const durability = durableA(request)
      const stream = chat({
        adapter: scriptedAdapter(15),
        messages: [{ role: 'user', content: 'count for me' }],
        threadId,
        runId: durability.runId,
        middleware: [withLocks(locksA), recordRun(storesA)],
      })
      return toServerSentEventsResponse(stream, { durability: { adapter: durability, batch: 4 } })
    }

    const response = await post(new Request('http://replica-a/chat', { method: 'POST', headers: { 'X-Run-Id': runId } }))
    expect(response.headers.get('Content-Type')).toBe('text/event-stream')
    const firstPart = await readEvents(response, 9)
    expect(firstPart).toHaveLength(9)
    expect(firstPart.every((e) => typeof e.id === 'string')).toBe(true)
    const lastSeen = firstPart.at(-1)!.id!

    // The consumer is gone; the producer keeps draining into the log. Replica B
    // resumes from the last offset the consumer saw (native Last-Event-ID).
    const resumeRequest = new Request(`http://replica-b/chat?runId=${runId}`, { headers: { 'Last-Event-ID': lastSeen } })
    const resumed = resumeServerSentEventsResponse({ adapter: durableB(resumeRequest) })
    expect(resumed.status).toBe(200)
    const rest = await readEvents(resumed)

    // Exactly once, nothing missing: the two parts are the whole stored log.
    const log = await durableB(runId).snapshot()
    const seen = [...firstPart, ...rest]
    expect(seen.map((e) => e.id)).toEqual(log.map((e) => e.offset))
    expect(new Set(seen.map((e) => e.id)).size).toBe(seen.length)
    expect(seen.map((e) => e.data)).toEqual(log.map((e) => e.chunk))
    expect(seen[0]!.data).toMatchObject({ type: 'CUSTOM', name: 'run.accepted' })
    expect(seen.at(-1)!.data).toMatchObject({ type: 'RUN_FINISHED' })
    const text = seen
      .map((e) => e.data as { type: string; delta?: string })
      .filter((c) => c.type === 'TEXT_MESSAGE_CONTENT')
      .map((c) => c.delta)
      .join('')
    expect(text).toBe(SCRIPT.join(''))
    // The remainder really started after the disconnect point.
    expect(rest.length).toBeGreaterThan(0)
    expect(rest[0]!.id).not.toBe(lastSeen)

    // replayRunStream over replica B's adapter yields the same remainder.
    const replayed: StreamChunk[] = []
    for await (const chunk of replayRunStream(durableB({ runId }), lastSeen)) replayed.push(chunk)
    expect(replayed).toEqual(rest.map((e) => e.data))

    // The runs store recorded the run (written by replica A, read on B).
    let record = await storesB.runs.get(runId)
    await until(async () => (record = await storesB.runs.get(runId))?.status === 'completed')
    expect(record).toMatchObject({ runId, threadId, status: 'completed' })
    expect(typeof record?.finishedAt).toBe('number')
    expect(await storesB.runs.findActiveRun(threadId)).toBeNull()
    // The whole transcript: the user's message and the reply, each exactly once.
    expect(await transcriptOf(storesB, threadId)).toEqual([
      { role: 'user', content: 'count for me' },
      { role: 'assistant', content: SCRIPT.join('') },
    ])
  })

  it('the run-driver lock serialises two drivers on two replicas and the epoch goes 1 -> 2', async () => {
    const runId = 'e2e-run-1'
    const drivers = [
      { name: 'A', locks: postgresLocks(replicaA, { pollMs: 50 }), runs: postgresPersistence(replicaA).stores.runs },
      { name: 'B', locks: postgresLocks(replicaB, { pollMs: 50 }), runs: postgresPersistence(replicaB).stores.runs },
    ]
    await drivers[0]!.runs.update(runId, { driverEpoch: undefined })
    const intervals: Array<{ name: string; start: number; end: number; epoch: number }> = []
    // What withRunClaim does: lock, read, bump the epoch, drive.
    await Promise.all(
      drivers.map((d) =>
        d.locks.withLock(`run-driver:${runId}`, async (signal) => {
          const start = performance.now()
          const record = await d.runs.get(runId)
          const epoch = (record?.driverEpoch ?? 0) + 1
          await d.runs.update(runId, { driverEpoch: epoch })
          await sleep(250)
          expect(signal.aborted).toBe(false)
          intervals.push({ name: d.name, start, end: performance.now(), epoch })
        }),
      ),
    )
    intervals.sort((a, b) => a.start - b.start)
    expect(intervals).toHaveLength(2)
    expect(intervals[1]!.start).toBeGreaterThanOrEqual(intervals[0]!.end)
    expect(intervals.map((i) => i.epoch)).toEqual([1, 2])
    expect((await drivers[1]!.runs.get(runId))?.driverEpoch).toBe(2)
  })

  it('over node:http (the example glue): headers before the first chunk, the transcript once, no reader outlives its client', async () => {
    const runId = 'e2e-http-run'
    const threadId = 'e2e-http-thread'
    const storesA = postgresPersistence(replicaA).stores
    const durableA = postgresDurability(replicaA)
    // Replica B's reads are counted: a reader left behind by a gone client would keep querying.
    const countedB = countingPool(replicaB)
    const durableB = postgresDurability(countedB.db, { fallbackPollMs: 100 })
    let open!: () => void
    const gate = new Promise<void>((resolve) => (open = resolve))
    const BEFORE = 5

    const server = http.createServer(
      nodeHandler((request) => {
        if (request.method === 'POST') {
          const log = durableA(request)
          const stream = chat({
            adapter: gatedAdapter(BEFORE, gate),
            messages: [{ role: 'user', content: 'count for me' }],
            threadId,
            runId: log.runId,
            middleware: [recordRun(storesA)],
          })
          return toServerSentEventsResponse(stream, { durability: { adapter: log, batch: 1 } })
        }
        return resumeServerSentEventsResponse({ adapter: durableB(request) })
      }),
    )
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/chat`
    try {
      // The producer streams the first words, then waits at the gate; the client leaves.
      const post = new AbortController()
      const produced = await fetch(base, { method: 'POST', headers: { 'X-Run-Id': runId }, signal: post.signal })
      const firstPart = await readEvents(produced, 2 + 1 + BEFORE) // run.accepted, RUN_STARTED, START, words
      post.abort()
      const lastSeen = firstPart.at(-1)!.id!
      expect(firstPart.at(-1)!.data).toMatchObject({ type: 'TEXT_MESSAGE_CONTENT', delta: SCRIPT[BEFORE - 1] })

      // A resume while nothing new exists: the 200 and its headers arrive before any chunk.
      const resume = new AbortController()
      const headersIn = Promise.race([
        fetch(`${base}?runId=${runId}`, { headers: { 'Last-Event-ID': lastSeen }, signal: resume.signal }),
        // No chunk comes until the gate opens, so headers that wait for one never
        // arrive: the ceiling only has to be finite, not tight.
        sleep(20_000).then(() => null),
      ])
      const waiting = await headersIn
      expect(waiting, 'resume response headers were not flushed before the first chunk').not.toBeNull()
      expect(waiting!.status).toBe(200)
      expect(waiting!.headers.get('content-type')).toBe('text/event-stream')

      // The resuming client goes away; its reader must stop querying the database.
      resume.abort()
      // Wait until B's reads stop (a reader left behind polls every 100 ms and never stops).
      let readsAfterLeaving = countedB.count()
      for (let i = 0; i < 10; i++) {
        await sleep(300)
        if (countedB.count() === readsAfterLeaving) break
        readsAfterLeaving = countedB.count()
      }
      open()
      let record = await storesA.runs.get(runId)
      await until(async () => (record = await storesA.runs.get(runId))?.status === 'completed')
      expect(record?.status).toBe('completed')
      await sleep(400) // several fallback polls
      expect(countedB.count(), 'a reader outlived its client').toBe(readsAfterLeaving)

      // A fresh resume gets exactly the remainder.
      const rest = await readEvents(await fetch(`${base}?runId=${runId}`, { headers: { 'Last-Event-ID': lastSeen } }))
      const log = await durableA(runId).snapshot()
      expect([...firstPart, ...rest].map((e) => e.id)).toEqual(log.map((e) => e.offset))
      expect(await transcriptOf(storesA, threadId)).toEqual([
        { role: 'user', content: 'count for me' },
        { role: 'assistant', content: SCRIPT.join('') },
      ])
    } finally {
      open()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      await durableA.close()
      await durableB.close()
    }
  })
})
