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
import { makePool, reset, sleep } from './helpers.js'

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
    async onFinish(ctx, info) {
      await stores.messages.saveThread(ctx.threadId, [
        ...ctx.messages,
        { role: 'assistant', content: info.content },
      ])
      await stores.runs.update(ctx.runId, { status: 'completed', finishedAt: Date.now() })
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
    for (let i = 0; i < 100 && record?.status !== 'completed'; i++) {
      await sleep(50)
      record = await storesB.runs.get(runId)
    }
    expect(record).toMatchObject({ runId, threadId, status: 'completed' })
    expect(typeof record?.finishedAt).toBe('number')
    expect(await storesB.runs.findActiveRun(threadId)).toBeNull()
    const transcript = await storesB.messages.loadThread(threadId)
    expect(transcript.at(-1)).toEqual({ role: 'assistant', content: SCRIPT.join('') })
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
})
